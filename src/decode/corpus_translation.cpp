#include "decode/corpus_translation.h"

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "data/corpus_reader.h"
#include "decode/pair_scoring.h"
#include "decode/sampling.h"
#include "decode/translator.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_text.h"
#include "util/log.h"
#include "util/phase_progress.h"
#include "util/timer.h"
#include "util/utf8.h"

namespace nmt::decode {
namespace fs = std::filesystem;
namespace {

/// Test hook: "R:K" makes rank R kill itself (SIGKILL, as a lost node) once it has kept K
/// shards, so that the end-to-end tests can resume a run killed part-way.
constexpr const char* kKillHook = "NMT_TRANSLATE_TEST_KILL_AFTER";

/// Lines of the input (a pass of reading: the shards' count and the ETA need it).
int64_t count_lines(const std::string& input) {
  data::LineReader reader(input);
  std::string line;
  while (reader.next(&line)) {
  }
  return reader.line_number();
}

/// "size <bytes>, modified <ns>": what tells a file changed without reading it.
std::string file_stamp(const fs::path& file) {
  std::error_code error;
  const auto size = fs::file_size(file, error);
  NMT_CHECK(!error, DataError, "{}: {}", file.string(), error.message());
  const auto time = fs::last_write_time(file, error);
  NMT_CHECK(!error, DataError, "{}: {}", file.string(), error.message());
  return fmt::format("{} bytes, modified {}", size,
                     static_cast<int64_t>(time.time_since_epoch().count()));
}

/// Reads a file forward, one shard's lines at a time (never the whole file).
class ShardReader {
 public:
  ShardReader(const std::string& input, int64_t shard_lines)
      : reader_(input), shard_lines_(shard_lines) {}

  /// The lines of shard i (shards are asked for in increasing order).
  std::vector<std::string> read(int64_t shard) {
    std::string line;
    const int64_t first = shard * shard_lines_;
    while (reader_.line_number() < first && reader_.next(&line)) {
    }
    std::vector<std::string> lines;
    while (static_cast<int64_t>(lines.size()) < shard_lines_ && reader_.next(&line)) {
      const size_t bad = find_invalid_utf8(line);
      NMT_CHECK(bad == std::string_view::npos, DataError, "{}:{}: invalid UTF-8 at byte {}",
                reader_.path().string(), reader_.line_number(), bad + 1);
      lines.push_back(line);
    }
    return lines;
  }

 private:
  data::LineReader reader_;
  int64_t shard_lines_;
};

/// The input and, when scoring, the targets, read shard by shard together.
struct PairReader {
  ShardReader sources;
  std::optional<ShardReader> targets;

  explicit PairReader(const CorpusOptions& corpus) : sources(corpus.input, corpus.shard_lines) {
    if (!corpus.targets.empty()) targets.emplace(corpus.targets, corpus.shard_lines);
  }
};

/// One rank's decoding of its shards, with its progress lines.
class CorpusRank {
 public:
  CorpusRank(Translator& translator, const CorpusOptions& corpus, const Manifest& manifest,
             int64_t lines)
      : translator_(translator),
        corpus_(corpus),
        folder_(corpus.output, manifest, corpus.force, corpus.rank == 0),
        lines_(lines),
        shards_((lines + corpus.shard_lines - 1) / corpus.shard_lines),
        kill_after_(kill_hook(corpus.rank)) {}

  int64_t shards() const { return shards_; }
  const ShardFolder& folder() const { return folder_; }

  /// Decodes the shards of `wanted` (increasing) that are not done and that nobody else
  /// decodes; with `wait`, waits for those that a live rank holds and decodes them if it died.
  void pass(const std::vector<int64_t>& wanted, bool wait) {
    planned_lines_ = decoded_lines_;
    for (const int64_t shard : wanted)
      if (!folder_.done(shard)) planned_lines_ += shard_size(shard);
    std::unique_ptr<PairReader> reader;  // opened at the first shard to decode
    for (const int64_t shard : wanted) {
      std::optional<FileLock> claim = folder_.claim(shard, wait);
      if (!claim) continue;
      if (!reader) reader = std::make_unique<PairReader>(corpus_);
      const std::vector<std::string> lines = reader->sources.read(shard);
      if (reader->targets)
        score(shard, lines, reader->targets->read(shard));
      else
        decode(shard, lines);
    }
  }

  /// Shards not done yet.
  std::vector<int64_t> missing() const {
    std::vector<int64_t> shards;
    for (int64_t i = 0; i < shards_; ++i)
      if (!folder_.done(i)) shards.push_back(i);
    return shards;
  }

  /// This rank's shards: i % world_size == rank.
  std::vector<int64_t> own() const {
    std::vector<int64_t> shards;
    for (int64_t i = corpus_.rank; i < shards_; i += corpus_.world_size) shards.push_back(i);
    return shards;
  }

 private:
  static int64_t kill_hook(int rank) {
    const char* value = std::getenv(kKillHook);
    int hook_rank = -1;
    long long after = 0;
    if (!value || std::sscanf(value, "%d:%lld", &hook_rank, &after) != 2) return -1;
    return hook_rank == rank ? after : -1;
  }

  void decode(int64_t shard, const std::vector<std::string>& lines) {
    const auto start = Clock::now();
    TranslateStats stats;
    const int64_t first = shard * corpus_.shard_lines;
    const auto on_batch = [&](int64_t done) { report(done); };
    const auto results = translator_.translate(lines, first, &stats, on_batch);
    std::string text;
    for (const auto& translations : results) text += translator_.output_text(translations);
    keep(shard, text, stats, start);
  }

  /// Scores the pairs of a shard (--score).
  void score(int64_t shard, const std::vector<std::string>& sources,
             const std::vector<std::string>& targets) {
    const auto start = Clock::now();
    TranslateStats stats;
    const int64_t first = shard * corpus_.shard_lines;
    const auto on_batch = [&](int64_t done) { report(done); };
    std::string text;
    for (const PairScore& s : translator_.score(sources, targets, first, &stats, on_batch))
      text += score_line(s);
    keep(shard, text, stats, start);
  }

  /// Commits a shard's output and counts it.
  void keep(int64_t shard, const std::string& text, const TranslateStats& stats,
            Clock::time_point start) {
    folder_.commit(shard, text,
                   {corpus_.rank, corpus_.run, stats.sentences, stats.source_tokens,
                    stats.output_tokens, seconds_since(start)});
    decoded_lines_ += stats.sentences;
    decoded_tokens_ += stats.output_tokens;
    log::debug("translate", "rank {}: shard {} of {} kept ({} lines)", corpus_.rank, shard, shards_,
               stats.sentences);
    if (++kept_ == kill_after_) ::raise(SIGKILL);
  }

  /// Lines of shard i (the last one may be short).
  int64_t shard_size(int64_t shard) const {
    return std::min(corpus_.shard_lines, lines_ - shard * corpus_.shard_lines);
  }

  /// Rank 0's progress line, at most every progress_every: the lines it decoded of those it
  /// has taken on (its own shards, then those it takes over), and output tokens per second
  /// of the shards kept so far.
  void report(int64_t shard_done) {
    if (corpus_.rank != 0 || Clock::now() - last_line_ < corpus_.progress_every) return;
    last_line_ = Clock::now();
    const double seconds = seconds_since(start_);
    const double done = double(decoded_lines_ + shard_done);
    const std::string tokens =
        decoded_tokens_ == 0 ? std::string()
                             : fmt::format(", {} output tokens/s",
                                           log::format_count(double(decoded_tokens_) / seconds));
    log::info("translate", "{}{}",
              log::progress_line("rank 0 of " + std::to_string(corpus_.world_size), "lines", done,
                                 double(planned_lines_), seconds),
              tokens);
  }

  Translator& translator_;
  const CorpusOptions& corpus_;
  ShardFolder folder_;
  int64_t lines_, shards_;
  int64_t kill_after_;
  int64_t kept_ = 0;
  int64_t decoded_lines_ = 0, decoded_tokens_ = 0;
  int64_t planned_lines_ = 0;  // decoded_lines_ + the lines of this pass's shards to decode
  Clock::time_point start_ = Clock::now(), last_line_ = Clock::now();
};

/// The figures of one rank's shards of this run.
struct RankFigures {
  int64_t shards = 0, sentences = 0, source_tokens = 0, output_tokens = 0;
  double seconds = 0;
};

/// The summary: the whole output, what this run decoded, and by which rank.
nlohmann::ordered_json summary(const std::vector<ShardRecord>& records, const std::string& run,
                               int64_t lines, double seconds) {
  std::map<int64_t, RankFigures> ranks;
  RankFigures total;
  for (const ShardRecord& r : records) {
    if (r.run != run) continue;
    for (RankFigures* f : {&ranks[r.rank], &total}) {
      ++f->shards;
      f->sentences += r.lines;
      f->source_tokens += r.source_tokens;
      f->output_tokens += r.output_tokens;
      f->seconds += r.seconds;
    }
  }
  nlohmann::ordered_json o;
  o["lines"] = lines;
  o["shards"] = records.size();
  o["shards_decoded"] = total.shards;
  o["shards_resumed"] = static_cast<int64_t>(records.size()) - total.shards;
  o["sentences"] = total.sentences;
  o["source_tokens"] = total.source_tokens;
  o["output_tokens"] = total.output_tokens;
  o["seconds"] = seconds;
  o["sentences_per_s"] = seconds > 0 ? double(total.sentences) / seconds : 0.0;
  o["output_tokens_per_s"] = seconds > 0 ? double(total.output_tokens) / seconds : 0.0;
  o["ranks"] = nlohmann::ordered_json::array();
  for (const auto& [rank, f] : ranks)
    o["ranks"].push_back({{"rank", rank},
                          {"shards", f.shards},
                          {"sentences", f.sentences},
                          {"source_tokens", f.source_tokens},
                          {"output_tokens", f.output_tokens},
                          {"seconds", f.seconds}});
  return o;
}

}  // namespace

Manifest corpus_manifest(const CorpusOptions& corpus, const TranslateOptions& options,
                         const std::vector<ModelSource>& models) {
  const SearchOptions& s = options.search;
  Manifest m;
  // A translation's manifest is as before scoring existed, so that its folders still resume.
  if (!corpus.targets.empty()) m.emplace_back("mode", "score");
  m.emplace_back("input", fs::absolute(corpus.input).lexically_normal().string());
  m.emplace_back("input_file", file_stamp(corpus.input));
  if (!corpus.targets.empty()) {
    m.emplace_back("targets", fs::absolute(corpus.targets).lexically_normal().string());
    m.emplace_back("targets_file", file_stamp(corpus.targets));
  }
  // One model's keys are as before ensembles existed, so that its folders still resume.
  std::vector<std::string> weights;
  for (size_t k = 0; k < models.size(); ++k) {
    const std::vector<fs::path>& files = models[k].files;
    const std::string model = models.size() == 1 ? "" : fmt::format("model{}_", k);
    for (size_t i = 0; i < files.size(); ++i) {
      const std::string key =
          model + (files.size() == 1 ? "checkpoint" : fmt::format("checkpoint{}", i));
      m.emplace_back(key, fs::absolute(files[i]).lexically_normal().string() + " (" +
                              file_stamp(files[i]) + ")");
    }
    weights.push_back(fmt::format("{}", models[k].weight));
  }
  if (models.size() > 1)
    m.emplace_back("ensemble_weights", fmt::format("{}", fmt::join(weights, " ")));
  m.emplace_back("shard_lines", std::to_string(corpus.shard_lines));
  m.emplace_back("weights", std::to_string(static_cast<int>(options.weights)));
  m.emplace_back("amp", std::to_string(static_cast<int>(options.amp)));
  m.emplace_back("max_tokens", std::to_string(options.max_tokens));
  m.emplace_back("beam", std::to_string(s.beam));
  m.emplace_back("length_penalty", fmt::format("{}", s.length_penalty));
  m.emplace_back("max_len_a", fmt::format("{}", s.max_len_a));
  m.emplace_back("max_len_b", std::to_string(s.max_len_b));
  m.emplace_back("nbest", std::to_string(s.nbest));
  m.emplace_back("with_scores", options.with_scores ? "true" : "false");
  m.emplace_back(
      "sampling",
      s.sampling ? describe(*s.sampling) + fmt::format(", seed {}", s.sampling->seed) : "off");
  m.emplace_back("tgt_lang", options.tgt_lang);
  m.emplace_back("src_lang", options.src_lang);
  return m;
}

void translate_corpus(Translator& translator, const TranslateOptions& options,
                      const CorpusOptions& requested) {
  NMT_CHECK(requested.shard_lines >= 0, ConfigError,
            "shard lines: expected >= 1 (or 0: automatic), found {}", requested.shard_lines);
  const auto start = Clock::now();
  const int64_t lines = requested.targets.empty()
                            ? count_lines(requested.input)
                            : count_pair_lines(requested.input, requested.targets);
  CorpusOptions corpus = requested;
  // --force starts over: the stored size is not to be kept (and rank 0 may be replacing it).
  corpus.shard_lines =
      shard_lines_for(requested.shard_lines, lines, requested.world_size,
                      requested.force ? std::nullopt : stored_shard_lines(requested.output));
  CorpusRank rank(translator, corpus, corpus_manifest(corpus, options, translator.models()), lines);
  if (corpus.rank == 0)
    log::info("translate", "{} lines in {} shard(s) of {} over {} rank(s); {} already done", lines,
              rank.shards(), corpus.shard_lines, corpus.world_size,
              rank.shards() - static_cast<int64_t>(rank.missing().size()));
  if (corpus.sync.opened) corpus.sync.opened();
  rank.pass(rank.own(), false);
  if (corpus.rank == 0) {
    // What other ranks have not kept: taken over where nobody holds it, then waited for.
    rank.pass(rank.missing(), false);
    rank.pass(rank.missing(), true);
  }
  if (corpus.sync.finished) corpus.sync.finished();
  if (corpus.rank != 0) return;
  const std::vector<ShardRecord> records = rank.folder().records(rank.shards());
  rank.folder().assemble(corpus.output, rank.shards());
  const nlohmann::ordered_json o = summary(records, corpus.run, lines, seconds_since(start));
  log::info("translate",
            "{} lines ({} of {} shards decoded now) in {:.2f} s: {:.1f} lines/s, "
            "{:.1f} output tokens/s; wrote {}",
            lines, o["shards_decoded"].get<int64_t>(), rank.shards(), o["seconds"].get<double>(),
            o["sentences_per_s"].get<double>(), o["output_tokens_per_s"].get<double>(),
            corpus.output);
  if (!corpus.stats_json.empty()) write_file_atomically(corpus.stats_json, json::pretty(o));
}

}  // namespace nmt::decode
