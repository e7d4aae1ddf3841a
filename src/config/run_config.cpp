#include "config/run_config.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "config/run_config_checks.h"
#include "config/run_schema.h"
#include "config/schema.h"
#include "util/error.h"
#include "util/hash.h"

namespace nmt::config {
namespace {

constexpr int64_t kIntMax = std::numeric_limits<int64_t>::max();
constexpr double kRealMax = std::numeric_limits<double>::max();

/// A component's table of enum names, as the schema takes it.
template <class Enum, size_t N>
std::vector<std::pair<std::string, Enum>> names_of(
    const std::array<std::pair<std::string_view, Enum>, N>& table) {
  std::vector<std::pair<std::string, Enum>> names;
  for (const auto& [name, value] : table) names.emplace_back(std::string(name), value);
  return names;
}

/// The log levels by the names util/log.h gives them.
std::vector<std::pair<std::string, log::Level>> level_names() {
  std::vector<std::pair<std::string, log::Level>> names;
  for (const std::string& name : log::level_names()) {
    log::Level level = log::Level::kInfo;
    log::parse_level(name, &level);
    names.emplace_back(name, level);
  }
  return names;
}

}  // namespace

/// Binds every configurable field of `c` to its key. The one list of keys, docs and bounds.
Schema bind(RunConfig& c) {
  Schema s;
  s.text("run_dir", &c.run_dir, "logs, vocabulary, token cache, checkpoints, metrics.jsonl");

  model::ModelOptions& m = c.model;
  s.integer("model.encoder_layers", &m.encoder_layers, 1, 64, "encoder blocks");
  s.integer("model.decoder_layers", &m.decoder_layers, 1, 64, "decoder blocks");
  s.integer("model.d_model", &m.d_model, 8, 65536, "model width (embedding size)");
  s.integer("model.heads", &m.heads, 1, 1024, "attention heads; must divide d_model");
  s.integer("model.ffn_dim", &m.ffn_dim, 1, 1 << 20, "feed-forward inner width");
  s.real("model.dropout", &m.dropout, 0, 0.99, "dropout on residual branches and embeddings");
  s.real("model.attention_dropout", &m.attention_dropout, 0, 0.99, "dropout on attention weights");
  s.real("model.activation_dropout", &m.activation_dropout, 0, 0.99,
         "dropout after the feed-forward activation");
  s.choice("model.activation", &m.activation,
           {{"relu", model::Activation::kRelu},
            {"gelu", model::Activation::kGelu},
            {"silu", model::Activation::kSilu}},
           "feed-forward activation: gelu is the exact (erf) form; silu is x * sigmoid(x) (swish)");
  s.choice("model.norm", &m.norm,
           {{"pre", model::NormPosition::kPre}, {"post", model::NormPosition::kPost}},
           "layer norm before (pre) or after (post) each residual block");
  s.choice("model.positions", &m.positions,
           {{"sinusoidal", model::PositionEncoding::kSinusoidal},
            {"learned", model::PositionEncoding::kLearned},
            {"marian", model::PositionEncoding::kMarian},
            {"m2m100", model::PositionEncoding::kM2m100}},
           "position encoding: sinusoidal (fairseq's table), learned, marian (MarianMT's table: "
           "frequencies 10000^(-2i/d_model)), m2m100 (fairseq's table from row pad id + 1, "
           "padding-aware, as M2M100/NLLB)");
  s.integer("model.max_positions", &m.max_positions, 8, 1 << 20,
            "longest sequence the model accepts (tokens)");
  s.choice("model.tie_embeddings", &m.tie_embeddings,
           {{"none", model::TiedEmbeddings::kNone},
            {"decoder", model::TiedEmbeddings::kDecoder},
            {"all", model::TiedEmbeddings::kAll}},
           "share embeddings: decoder input+output, or all three (needs a joint vocabulary)");
  s.boolean("model.scale_embeddings", &m.scale_embeddings, "multiply embeddings by sqrt(d_model)");
  s.boolean("model.output_bias", &m.output_bias,
            "a trained bias added to the logits (MarianMT's final_logits_bias)");
  s.boolean("model.freeze_output_bias", &m.freeze_output_bias,
            "keep output_bias fixed in training, as transformers does (import-hf sets it)");
  s.choice("model.decoder_start", &m.decoder_start,
           {{"bos", model::DecoderStart::kBos},
            {"eos", model::DecoderStart::kEos},
            {"pad", model::DecoderStart::kPad}},
           "token the decoder input starts with, in training and search (MarianMT: pad, "
           "M2M100/NLLB: eos)");

  data::DataOptions& d = c.data;
  s.corpus_list("data.train", &d.train,
                "several weighted training corpora [{name, src, tgt, weight, tag}, ...]; weight is "
                "relative to a corpus's size (1: each pair once an epoch, 2: twice, 0.5: half); "
                "tag: bt puts <BT> first in its sources (back-translated data); src_lang, tgt_lang: "
                "ISO 639 codes of its two languages (de, en; deu, gsw: checked against the ISO "
                "639-1/-3 lists); empty: the one corpus train_src/train_tgt");
  s.input_path("data.train_src", &d.train_src, "training source text, one sentence per line");
  s.input_path("data.train_tgt", &d.train_tgt, "training target text, aligned with train_src");
  s.corpus_list("data.valid", &d.valid,
                "several named validation sets [{name, src, tgt, src_lang, tgt_lang}, ...], each "
                "reported; train.best_set picks the best checkpoint (default the first); empty: "
                "the one set valid_src/valid_tgt");
  s.input_path("data.valid_src", &d.valid_src, "validation source text (empty: no validation)");
  s.input_path("data.valid_tgt", &d.valid_tgt, "validation target text, aligned with valid_src");
  s.choice("data.lang_tags", &d.lang_tags,
           {{"none", data::LangTags::kNone}, {"target", data::LangTags::kTarget}},
           "target: the target language's tag <2xx> first in every source (one model, many "
           "directions; every data.train/valid entry names src_lang and tgt_lang)");
  s.real("data.sampling_temperature", &d.sampling_temperature, 0.01, 1000,
         "corpus i drawn in proportion to weight x pairs^(1/T), the epoch keeping its size; 1: "
         "by weight x pairs; no effect with one corpus");
  s.input_path("data.spm_model", &d.spm_model, "SentencePiece model to use; empty: train one");
  s.integer("data.vocab_size", &d.vocab_size, 16, 1 << 20, "pieces in a trained SentencePiece model");
  s.choice("data.subword_model", &d.subword_model,
           {{"unigram", data::SubwordModel::kUnigram}, {"bpe", data::SubwordModel::kBpe}},
           "type of a trained SentencePiece model");
  s.boolean("data.joint_vocab", &d.joint_vocab, "one vocabulary for source and target");
  s.integer("data.spm_sample_lines", &d.spm_sample_lines, 100, kIntMax,
            "lines sampled to train SentencePiece");
  s.integer("data.max_len", &d.max_len, 1, 1 << 20, "longer sentences are filtered (tokens)");
  s.real("data.max_len_ratio", &d.max_len_ratio, 1, kRealMax,
         "pairs with a larger long/short length ratio are filtered");
  s.choice("data.invalid_utf8", &d.invalid_utf8,
           {{"error", data::InvalidUtf8Policy::kError}, {"skip", data::InvalidUtf8Policy::kSkip}},
           "a line that is not valid UTF-8 stops the run (error) or is counted and skipped");
  s.integer_or_word("data.max_tokens", &d.max_tokens, 1, kIntMax, "auto",
                    "padded tokens per batch per rank (sentences x longest sentence); auto: "
                    "the most that fits in memory, measured at start on the longest sentences");
  s.real("data.auto_memory_fraction", &d.auto_memory_fraction, 0.05, 1,
         "max_tokens auto: share of the memory a training step may use at its peak");
  s.integer("data.auto_memory_mb", &d.auto_memory_mb, 0, kIntMax,
            "max_tokens auto: memory per rank to fit in (MiB); 0: the GPU's free memory at "
            "start, shared by the ranks on it (on CPU, 0 makes auto mean 4096)");
  s.integer("data.auto_max_tokens_limit", &d.auto_max_tokens_limit, 1, kIntMax,
            "max_tokens auto: the largest budget it may choose (tokens)");
  s.integer("data.max_sentences", &d.max_sentences, 0, kIntMax,
            "sentences per batch per rank; 0: no limit");
  s.choice("data.batching", &d.batching,
           {{"tokens", data::Batching::kTokens}, {"sentences", data::Batching::kSentences}},
           "tokens: batches of max_tokens padded tokens from length-sorted buckets, balanced "
           "across ranks; sentences: a fixed sentence count in corpus order with the same mean "
           "padded tokens (the naive way, for comparison runs only)");
  s.real("data.batch_overhead", &d.batch_overhead, 0, 100,
         "fixed cost of one batch as a fraction of max_tokens, traded against padding when "
         "cutting batches: higher gives fewer, fuller batches with more padding");
  s.integer("data.update_freq", &d.update_freq, 1, 1 << 16,
            "batches accumulated per optimizer update");
  s.integer("data.tokens_per_update", &d.tokens_per_update, 0, kIntMax,
            "global padded tokens per update (sets update_freq); 0: use update_freq");
  s.integer("data.prefetch", &d.prefetch, 0, 1 << 16, "batches prepared ahead in the background");

  train::TrainOptions& t = c.train;
  s.integer("train.max_steps", &t.max_steps, 0, kIntMax, "optimizer updates; 0: no limit");
  s.integer("train.max_epochs", &t.max_epochs, 0, kIntMax, "passes over the data; 0: no limit");
  s.integer("train.max_minutes", &t.max_minutes, 0, kIntMax,
            "wall-clock budget (minutes); 0: no limit");
  s.integer("train.seed", &t.seed, 0, std::numeric_limits<uint32_t>::max(),
            "seed for initialization, dropout and data order");
  s.choice("train.optimizer", &t.optimizer,
           {{"adam", train::Optimizer::kAdam}, {"adamw", train::Optimizer::kAdamW},
            {"sgd", train::Optimizer::kSgd}},
           "Adam, AdamW with decoupled weight decay, or plain SGD (no momentum; for checks: "
           "unlike Adam it shows a wrong gradient scale)");
  s.real("train.lr", &t.lr, 0, 10, "peak learning rate");
  s.real("train.adam_beta1", &t.adam_beta1, 0, 0.999999, "Adam beta1");
  s.real("train.adam_beta2", &t.adam_beta2, 0, 0.999999, "Adam beta2");
  s.real("train.adam_eps", &t.adam_eps, 0, 1, "Adam epsilon");
  s.real("train.weight_decay", &t.weight_decay, 0, 10, "weight decay");
  s.choice("train.schedule", &t.schedule,
           {{"inverse_sqrt", train::LrSchedule::kInverseSqrt},
            {"constant", train::LrSchedule::kConstant},
            {"cosine", train::LrSchedule::kCosine}},
           "learning-rate schedule after linear warm-up");
  s.integer("train.warmup_steps", &t.warmup_steps, 0, kIntMax, "linear warm-up (steps)");
  s.real("train.clip_norm", &t.clip_norm, 0, kRealMax, "gradient-norm clipping; 0: off");
  s.real("train.label_smoothing", &t.label_smoothing, 0, 0.99, "label-smoothing epsilon");
  s.real("train.ema_decay", &t.ema_decay, 0, 0.999999,
         "moving average of the parameters, updated every step (e.g. 0.999 short runs, 0.9999 "
         "long ones); validation and nmt-translate use it; 0: off");
  s.text("train.init_from", &t.init_from,
         "fine-tune: start from this checkpoint (file or run directory)'s parameters and "
         "vocabulary, with a fresh optimizer, schedule and data position; empty: random init");
  s.integer("train.log_every", &t.log_every, 1, kIntMax, "steps between log lines and metrics");
  s.integer("train.valid_every", &t.valid_every, 0, kIntMax, "steps between validations; 0: never");
  s.boolean("train.valid_translate", &t.valid_translate,
            "validation also translates the validation set and scores BLEU and chrF");
  s.integer("train.valid_beam", &t.valid_beam, 1, 64, "beam of validation translation; 1: greedy");
  s.choice("train.best_metric", &t.best_metric,
           {{"loss", train::BestMetric::kLoss}, {"bleu", train::BestMetric::kBleu},
            {"chrf", train::BestMetric::kChrf}},
           "picks the best checkpoint and drives early stopping (bleu, chrf: valid_translate)");
  s.text("train.best_set", &t.best_set,
         "the validation set whose best_metric picks the best checkpoint: a data.valid name, "
         "mean (over all sets), or empty: the first");
  s.integer("train.patience", &t.patience, 0, kIntMax,
            "stop after this many validations without improvement of best_metric; 0: never");
  s.integer("train.threads", &t.threads, 0, 4096,
            "intra-op CPU threads per worker; 0: the CPUs this process may use, shared by the "
            "local workers unless an outside launcher bound each to its own");
  s.boolean("train.cache_host_memory", &t.cache_host_memory,
            "keep freed CPU tensor memory of 1 MiB and more for reuse (up to a quarter of RAM) "
            "instead of returning it to the system, which page-faults it in again every step");
  s.integer("train.max_oom_skips", &t.max_oom_skips, 1, kIntMax,
            "updates skipped in a row because a rank ran out of memory (every rank skips the "
            "update together) that stop the run");
  s.boolean("train.activation_checkpointing", &t.activation_checkpointing,
            "keep only each encoder and decoder layer's inputs and recompute its forward in "
            "backward: about one more forward per update for not keeping the layers' "
            "activations; same gradients");
  s.choice("train.quantize", &t.quantize,
           {{"none", model::Quantization::kNone}, {"int8", model::Quantization::kInt8}},
           "quantization-aware training: int8 computes with the weights (per row) and matrix "
           "inputs (per token) that CTranslate2's int8 computes with, gradients passed straight "
           "through; checkpoints keep float weights (docs/training.md#students-and-int8)");

  amp::AmpOptions& a = c.amp;
  std::vector<std::pair<std::string, std::optional<amp::AmpMode>>> amp_modes;
  for (const auto& [name, mode] : amp::kAmpModeNames) amp_modes.emplace_back(name, mode);
  amp_modes.emplace_back(amp::kAutoModeName, std::nullopt);
  s.choice("amp.mode", &a.mode, std::move(amp_modes),
           "autocast precision; fp16 uses dynamic loss scaling, bf16 needs none; auto: bf16 on "
           "GPUs of compute capability >= 8.0 and CPUs where it is faster, else off");
  s.real("amp.init_scale", &a.init_scale, 1, 1e30, "initial fp16 loss scale");
  s.integer("amp.growth_interval", &a.growth_interval, 1, kIntMax,
            "overflow-free steps before the loss scale grows");
  s.real("amp.growth_factor", &a.growth_factor, 1.000001, 1e6, "loss-scale growth multiplier");
  s.real("amp.backoff_factor", &a.backoff_factor, 1e-6, 0.999999,
         "loss-scale multiplier after an overflow");
  s.real("amp.min_scale", &a.min_scale, 0, 1e30,
         "loss scale below which training stops with an error");
  s.integer("amp.max_consecutive_skips", &a.max_consecutive_skips, 1, kIntMax,
            "overflowing steps in a row that stop training with an error");

  dist::DistOptions& ds = c.dist;
  s.integer("dist.nproc_per_node", &ds.nproc_per_node, 0, 1024,
            "workers on this node; 0: one per GPU, or 1 without GPU");
  s.choice("dist.backend", &ds.backend,
           {{"auto", dist::Backend::kAuto}, {"nccl", dist::Backend::kNccl},
            {"gloo", dist::Backend::kGloo}},
           "collectives: auto is NCCL on GPUs, Gloo on CPU");
  s.text("dist.master_addr", &ds.master_addr, "rendezvous host when no launcher sets MASTER_ADDR");
  s.integer("dist.master_port", &ds.master_port, 0, 65535,
            "rendezvous port when no launcher sets MASTER_PORT; 0: a free port");
  s.integer("dist.timeout_s", &ds.timeout_s, 1, kIntMax,
            "a rendezvous or collective waiting longer fails (seconds)");
  s.integer("dist.stop_grace_s", &ds.stop_grace_s, 0, kIntMax,
            "after forwarding SIGTERM, the built-in launcher waits this long for the workers to "
            "finish their update and write a checkpoint before SIGKILL (seconds)");
  s.real("dist.bucket_mb", &ds.bucket_mb, 0.001, 1 << 20, "gradient all-reduce bucket size (MB)");
  s.boolean("dist.overlap", &ds.overlap, "all-reduce gradient buckets during backward");
  s.choice("dist.sharding", &ds.sharding,
           {{"none", dist::Sharding::kNone}, {"optimizer", dist::Sharding::kOptimizer}},
           "optimizer: each rank keeps Adam's moments for 1/ranks of the parameters (ZeRO "
           "stage 1; 16 -> 8 + 8/ranks bytes a parameter), same updates as none");

  checkpoint::CheckpointOptions& ck = c.checkpoint;
  s.integer("checkpoint.every_steps", &ck.every_steps, 1, kIntMax,
            "steps between checkpoints (one is always written at the end)");
  s.integer("checkpoint.keep_last", &ck.keep_last, 1, kIntMax, "newest checkpoints kept");
  s.integer("checkpoint.keep_best", &ck.keep_best, 0, kIntMax,
            "best checkpoints kept, by train.best_metric");

  s.choice("log.level", &c.log.level, level_names(),
           "lowest level logged (rank 0 console; files of every rank)");
  s.boolean("log.to_file", &c.log.to_file, "each rank also logs to <run_dir>/logs/rank<R>.log");
  s.boolean("log.tensorboard", &c.train.tensorboard,
            "also write metrics.jsonl's records as TensorBoard events in <run_dir>/tensorboard/");
  return s;
}

RunConfig default_run_config(const std::filesystem::path& config_file) {
  RunConfig config;
  // New configs leave the precision to the hardware; a file, checkpoint or --set that names a
  // mode keeps it (a checkpoint stores the mode auto resolved to).
  config.amp.mode = std::nullopt;
  // Default run directory: runs/<config file name without extension>.
  config.run_dir = (std::filesystem::path("runs") / config_file.stem()).string();
  return config;
}

namespace {

YAML::Node read_yaml_file(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec))
    NMT_THROW(ConfigError, "config file not found: {}", file.string());
  if (!std::filesystem::is_regular_file(file, ec))
    NMT_THROW(ConfigError, "config path is not a regular file: {}", file.string());
  try {
    return YAML::LoadFile(file.string());
  } catch (const YAML::ParserException& e) {
    NMT_THROW(ConfigError, "{}:{}:{}: malformed YAML: {}", file.string(), e.mark.line + 1,
              e.mark.column + 1, e.msg);
  } catch (const YAML::BadFile&) {
    NMT_THROW(ConfigError, "cannot read config file: {}", file.string());
  }
}

}  // namespace

RunConfig load_run_config(const ConfigSources& sources, std::vector<std::string>* warnings) {
  RunConfig config = default_run_config(sources.file);
  Schema schema = bind(config);
  schema.apply_document(read_yaml_file(sources.file), sources.file.string());
  if (sources.checkpoint_yaml) {
    const std::string name = "checkpoint " + sources.checkpoint_name;
    YAML::Node stored;
    try {
      stored = YAML::Load(*sources.checkpoint_yaml);
    } catch (const YAML::Exception& e) {
      NMT_THROW(ConfigError, "{}: the stored config is not valid YAML: {}", name, e.msg);
    }
    // Where this invocation writes and how it logs are its own, not the checkpoint's.
    if (stored.IsMap()) {
      stored.remove("run_dir");
      stored.remove("log");
    }
    schema.apply_document(stored, name);
  }
  for (const std::string& assignment : sources.overrides) schema.apply_override(assignment);
  validate_run_config(config, schema, sources.file);
  if (warnings) {
    for (std::string& w : ineffective_settings(config, schema, sources.file))
      warnings->push_back(std::move(w));
  }
  return config;
}

RunConfig parse_stored_config(const std::string& yaml, const std::string& origin) {
  RunConfig config;
  Schema schema = bind(config);
  YAML::Node stored;
  try {
    stored = YAML::Load(yaml);
  } catch (const YAML::ParserException& e) {
    NMT_THROW(ConfigError, "{}: the stored config is not valid YAML ({}:{}): {}", origin,
              e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  schema.apply_document(stored, origin);
  return config;
}

std::string to_yaml(const RunConfig& config, bool with_docs) {
  RunConfig copy = config;
  return bind(copy).to_yaml(with_docs);
}

std::optional<std::string> model_difference(const RunConfig& here, const RunConfig& stored) {
  // Compared as the YAML text of each key, so enums read as the user writes them.
  const auto model_lines = [](const RunConfig& c) {
    std::map<std::string, std::string> lines;
    const std::string yaml = to_yaml(c, /*with_docs=*/false);
    bool in_model = false;
    size_t start = 0;
    while (start < yaml.size()) {
      const size_t end = std::min(yaml.find('\n', start), yaml.size());
      const std::string line = yaml.substr(start, end - start);
      start = end + 1;
      if (!line.empty() && line[0] != ' ') in_model = line.rfind("model:", 0) == 0;
      const size_t colon = line.find(':');
      if (in_model && line.rfind("  ", 0) == 0 && colon != std::string::npos)
        lines[line.substr(2, colon - 2)] = line.substr(std::min(colon + 2, line.size()));
    }
    return lines;
  };
  static const char* const kShape[] = {"encoder_layers", "decoder_layers",   "d_model",
                                       "heads",          "ffn_dim",          "norm",
                                       "positions",      "max_positions",    "tie_embeddings",
                                       "activation",     "scale_embeddings", "output_bias",
                                       "decoder_start"};
  const auto a = model_lines(here);
  const auto b = model_lines(stored);
  for (const char* key : kShape) {
    const auto ia = a.find(key);
    const auto ib = b.find(key);
    const std::string va = ia == a.end() ? "?" : ia->second;
    const std::string vb = ib == b.end() ? "?" : ib->second;
    if (va != vb)
      return fmt::format("model.{} is {} in the checkpoint but {} in this run's config", key, vb, va);
  }
  return std::nullopt;
}

std::string config_hash(const RunConfig& config) {
  // Only what changes the computation: where results go, logging, checkpoint cadence and
  // rendezvous details do not.
  RunConfig copy = config;
  copy.run_dir.clear();
  copy.log = log::LogOptions{};
  copy.checkpoint = checkpoint::CheckpointOptions{};
  copy.dist.master_addr.clear();
  copy.dist.master_port = 0;
  copy.dist.timeout_s = 0;
  copy.dist.stop_grace_s = 0;
  copy.data.prefetch = 0;
  copy.train.log_every = 0;
  copy.train.tensorboard = false;
  copy.train.threads = 0;
  copy.train.cache_host_memory = true;
  copy.train.activation_checkpointing = false;  // memory, not results: same gradients
  const std::string text = bind(copy).to_yaml(false);
  Fnv1a64 hash;
  hash.update(text);
  return hash.hex();
}

}  // namespace nmt::config
