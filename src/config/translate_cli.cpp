#include "config/translate_cli.h"

#include <CLI/CLI.hpp>

#include "config/cli_exit.h"

#include "config/run_config.h"
#include "config/sampling_spec.h"
#include "util/error.h"

namespace nmt::config {
namespace {

/// nmt-translate --amp takes the config's names (amp/amp_options.h).
std::vector<std::string> amp_names() {
  std::vector<std::string> names;
  for (const auto& [name, mode] : amp::kAmpModeNames) names.emplace_back(name);
  return names;
}

/// The options kept as given while CLI11 parses, then checked together and made into the
/// command's choices; and the options whose presence matters.
struct TranslateFlags {
  CLI::Option* beam = nullptr;
  CLI::Option* nbest = nullptr;
  CLI::Option* sampling = nullptr;
  CLI::Option* score = nullptr;
  CLI::Option* ensemble_weights = nullptr;
  std::string sampling_spec;
  uint64_t seed = 0;
  std::string device = "auto";
  std::string amp = "off";
  std::string weights = "auto";
  bool no_cache = false;
};

/// What to translate with, what and where to.
void add_file_options(CLI::App& app, TranslateCommand& command) {
  decode::TranslateOptions& o = command.options;
  app.add_option("-c,--checkpoint", o.checkpoints,
                 "checkpoint file, or a run directory: its checkpoints/ folder, taking the "
                 "best by train.best_metric (the lowest \"selection\" metadata), else the newest. "
                 "Repeat it for an ensemble (-c A -c B): at every step the models' "
                 "log-probabilities are averaged (weighted by --ensemble-weights); checkpoints "
                 "of other shapes may join, but all must store the same vocabulary")
      ->required()
      ->allow_extra_args(false)
      ->type_name("PATH|RUN_DIR");
  app.add_option("-i,--input", command.input,
                 "text to translate, one sentence per line (plain "
                 "or gzip; - for stdin)")
      ->capture_default_str()
      ->type_name("FILE");
  app.add_option("--stats-json", command.stats_json,
                 "also write the run's figures (sentences, tokens, seconds, rates; for one process "
                 "also load_seconds, the models' loading; for a corpus its shards, those decoded "
                 "now, and per rank) as JSON here, for scripts")
      ->type_name("FILE");
  app.add_option("--score", command.score_targets,
                 "score the given pairs instead of translating: source line i of the input "
                 "with target line i of FILE (as many lines; the input must be a file), "
                 "teacher-forced, batched by --max-tokens; output line i is "
                 "\"SUM<TAB>MEAN<TAB>TOKENS\": the sum of the target's log-probabilities, "
                 "that sum per target token, and the target tokens (EOS included), as "
                 "training's loss counts them. Search options do not apply")
      ->type_name("FILE");
  app.add_option("-o,--output", command.output,
                 "where to write the translations or scores (- for stdout)")
      ->capture_default_str()
      ->type_name("FILE");
}

/// Decoding a whole corpus on several workers, resumably.
void add_corpus_options(CLI::App& app, TranslateCommand& command) {
  app.add_option("--nproc-per-node,--nproc_per_node", command.nproc_per_node,
                 "decode the input file as a corpus on N workers of this node (one per GPU; "
                 "CPU workers where there is none), built in OUTPUT.parts/ shard by shard: "
                 "a killed run started again with the same arguments decodes only what is "
                 "missing, and OUTPUT appears when complete. 1: one process, resumably. Under "
                 "torchrun, mpirun or Slurm each rank runs as such a worker without it. Needs "
                 "-i FILE and -o FILE")
      ->check(CLI::Range(1, 1024))
      ->type_name("N");
  app.add_option("--shard-lines", command.shard_lines,
                 "input lines per shard of a corpus (the unit that is kept and resumed); 0: "
                 "one shard per worker, at most 10000 lines (a resumed run keeps the size it "
                 "started with)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str()
      ->type_name("N");
  app.add_flag("--force", command.force,
               "a corpus run whose OUTPUT.parts/ was made with other arguments starts over "
               "(without it, the run is refused, naming what differs)");
}

/// How outputs are searched for or drawn.
void add_search_options(CLI::App& app, decode::SearchOptions& s, TranslateFlags& flags) {
  flags.beam = app.add_option("--beam", s.beam, "beam size; 1 is greedy search")
                   ->check(CLI::Range(int64_t{1}, int64_t{1024}))
                   ->capture_default_str()
                   ->type_name("N");
  app.add_option("--length-penalty", s.length_penalty,
                 "alpha of the length penalty ((5 + |Y|) / 6)^alpha (Wu et al. 2016) that "
                 "hypotheses' scores are divided by; 0: none")
      ->capture_default_str()
      ->type_name("A");
  app.add_option("--max-len-a", s.max_len_a, "longest output = A * source tokens + B (tokens)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str()
      ->type_name("A");
  app.add_option("--max-len-b", s.max_len_b, "see --max-len-a")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str()
      ->type_name("B");
  flags.nbest = app.add_option("--nbest", s.nbest,
                               "write the N best hypotheses of each line (N <= beam), best "
                               "first, as \"text<TAB>score\" "
                               "lines (score: log-probability / length penalty)")
                    ->check(CLI::PositiveNumber)
                    ->type_name("N");
  flags.sampling =
      app.add_option("--sampling", flags.sampling_spec,
                     "draw each output token at random from the model's distribution instead of "
                     "searching (for back-translation): topk:K (among the K most probable "
                     "tokens), temperature:T (log-probabilities divided by T: < 1 sharper, > 1 "
                     "flatter), or topk:K,temperature:T. One output per line; not with --nbest "
                     "or --beam > 1")
          ->type_name("SPEC");
  app.add_option("--seed", flags.seed,
                 "seed of --sampling: input line i draws its random numbers from (seed, i) alone; "
                 "the same seed, input and --max-tokens give the same output on one machine, "
                 "and another --max-tokens changes a line only where padding moves a draw by "
                 "float rounding (rare)")
      ->needs(flags.sampling)
      ->capture_default_str()
      ->type_name("N");
}

/// Batching, device, weights, languages and logging.
void add_run_options(CLI::App& app, TranslateCommand& command, TranslateFlags& flags) {
  decode::TranslateOptions& o = command.options;
  app.add_option("--max-tokens", o.max_tokens,
                 "padded source tokens per batch (sentences x longest sentence)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str()
      ->type_name("N");
  app.add_option("--device", flags.device, "where to run: cuda when available unless told")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str()
      ->type_name("auto|cpu|cuda");
  app.add_option("--amp", flags.amp, "autocast precision of the forward passes")
      ->check(CLI::IsMember(amp_names()))
      ->capture_default_str()
      ->type_name("off|fp16|bf16");
  app.add_option("--average", o.average,
                 "translate with the element-wise mean of the newest K checkpoints of the run "
                 "directory (of each one in an ensemble)")
      ->check(CLI::NonNegativeNumber)
      ->type_name("K");
  flags.ensemble_weights =
      app.add_option("--ensemble-weights", o.ensemble_weights,
                     "the weight of each -c's model in an ensemble, in their order (numbers > "
                     "0, normalized to sum 1; default: equal): the log-probabilities of a step "
                     "are their weighted mean, and so are the scores written")
          ->expected(1, -1)
          ->check(CLI::PositiveNumber)
          ->type_name("W...");
  app.add_option("--weights", flags.weights,
                 "ema: the moving average of the parameters that train.ema_decay keeps; raw: "
                 "the trained parameters; auto: ema when the checkpoint has it, else raw")
      ->check(CLI::IsMember({"auto", "ema", "raw"}))
      ->capture_default_str()
      ->type_name("auto|ema|raw");
  app.add_flag("--no-cache", flags.no_cache,
               "re-run the decoder over the whole prefix at every step instead of using its "
               "cached state (slow; for comparisons)");
  app.add_option("--tgt-lang", o.tgt_lang,
                 "target language of a multilingual model (trained with data.lang_tags: "
                 "target, or an imported multilingual one), e.g. de; required for one, refused "
                 "for others")
      ->type_name("LANG");
  app.add_option("--src-lang", o.src_lang,
                 "source language of an imported M2M100 or NLLB model (its code starts every "
                 "source), e.g. en; required for one, refused for others")
      ->type_name("LANG");
  app.add_option("--threads", o.threads, "CPU threads for LibTorch (0: its default)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str()
      ->type_name("N");
  app.add_option("--log-level", command.log_level, "console log level")
      ->check(CLI::IsMember(log::level_names()))
      ->capture_default_str()
      ->type_name("LEVEL");
}

/// The search options that do not combine (throws CLI::ValidationError, CLI11's usage
/// error); --sampling's spec parsed into `s`, which then searches with one beam.
void check_search_options(const TranslateFlags& flags, decode::SearchOptions& s) {
  if (flags.sampling->count() > 0) {
    if (flags.nbest->count() > 0)
      throw CLI::ValidationError(
          "--nbest and --sampling do not combine: sampling draws one "
          "translation per line");
    if (flags.beam->count() > 0 && s.beam != 1)
      throw CLI::ValidationError("--beam " + std::to_string(s.beam) +
                                 " and --sampling do not combine: sampling draws instead of "
                                 "searching (give --beam 1 or leave it out)");
    try {
      s.sampling = parse_sampling_spec(flags.sampling_spec);
    } catch (const nmt::ConfigError& e) {
      throw CLI::ValidationError(e.what());
    }
    s.sampling->seed = flags.seed;
    s.beam = 1;
  }
  if (flags.score->count() > 0 && (flags.sampling->count() > 0 || flags.nbest->count() > 0))
    throw CLI::ValidationError(
        "--score scores the given targets: --sampling and --nbest do not apply");
  if (s.nbest > s.beam)
    throw CLI::ValidationError("--nbest", "--nbest " + std::to_string(s.nbest) +
                                              " exceeds --beam " + std::to_string(s.beam));
}

/// An ensemble's weights: one per -c (throws CLI::ValidationError otherwise).
void check_ensemble_options(const TranslateFlags& flags, const decode::TranslateOptions& o) {
  if (flags.ensemble_weights->count() == 0 || o.ensemble_weights.size() == o.checkpoints.size())
    return;
  throw CLI::ValidationError(
      "--ensemble-weights",
      "--ensemble-weights gives " + std::to_string(o.ensemble_weights.size()) + " weights for " +
          std::to_string(o.checkpoints.size()) + " checkpoints (-c): give one per -c");
}

/// The choices given as names, into the options' enums.
void apply_choices(const TranslateFlags& flags, decode::TranslateOptions& o) {
  decode::SearchOptions& s = o.search;
  s.cached = !flags.no_cache;
  o.with_scores = flags.nbest->count() > 0;
  s.scores = o.with_scores;  // only --nbest prints them
  o.device = flags.device == "cpu"    ? decode::DeviceChoice::kCpu
             : flags.device == "cuda" ? decode::DeviceChoice::kCuda
                                      : decode::DeviceChoice::kAuto;
  o.weights = flags.weights == "ema"   ? decode::WeightsChoice::kEma
              : flags.weights == "raw" ? decode::WeightsChoice::kRaw
                                       : decode::WeightsChoice::kAuto;
  for (const auto& [name, mode] : amp::kAmpModeNames)
    if (name == flags.amp) o.amp = mode;
}

}  // namespace

TranslateCommand parse_translate_command(int argc, const char* const* argv) {
  TranslateCommand command;
  CLI::App app{
      "nmt-translate: translates text, one sentence per line, with a checkpoint of nmt-train\n"
      "(or an ensemble of them: -c A -c B). The model, its config and its SentencePiece\n"
      "vocabulary all come from the checkpoint.\n"
      "Every input line gives one output line (--nbest N: N lines), in input order; an empty\n"
      "line gives an empty line. With --score TGT it scores given pairs instead (one line of\n"
      "\"SUM<TAB>MEAN<TAB>TOKENS\" per pair).\n"
      "Errors are reported as one line, with exit code 1 (2 for a\n"
      "wrong command line).",
      "nmt-translate"};
  app.set_version_flag("--version", std::string(NMT_VERSION));
  TranslateFlags flags;
  add_file_options(app, command);
  flags.score = app.get_option("--score");
  add_corpus_options(app, command);
  add_search_options(app, command.options.search, flags);
  add_run_options(app, command, flags);
  try {
    app.parse(argc, argv);
    check_search_options(flags, command.options.search);
    check_ensemble_options(flags, command.options);
  } catch (const CLI::ParseError& e) {
    command.exit_code = usage_exit_code(app, e);
    return command;
  }
  apply_choices(flags, command.options);
  return command;
}

}  // namespace nmt::config
