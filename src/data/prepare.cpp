#include "data/prepare.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include <thread>

#include "data/lang_tags.h"
#include "util/cpu_count.h"
#include "util/error.h"
#include "util/json_text.h"
#include "util/log.h"
#include "util/phase_record.h"
#include "util/timer.h"

namespace nmt::data {
namespace {

/// The "encoding" and "cache write" records of phases.jsonl for a cache built now.
void record_encoding(const std::filesystem::path& run_dir, const std::string& name,
                     const TokenCacheResult& r, int threads) {
  if (!r.built) return;
  const FilterCounts& c = r.cache.counts();
  const int cores = usable_cpus();
  record_phase(run_dir, "encoding", r.encode_seconds,
               {{"cache", name},
                {"pairs", c.read},
                {"kept", c.kept()},
                {"tokens", r.cache.src_tokens() + r.cache.tgt_tokens()},
                {"threads", threads},
                {"cores", cores},
                {"pairs_per_s", r.encode_seconds > 0 ? double(c.read) / r.encode_seconds : 0.0}});
  std::error_code ignored;
  const auto bytes = std::filesystem::file_size(r.cache.path(), ignored);
  record_phase(run_dir, "cache write", r.write_seconds,
               {{"cache", name}, {"pairs", c.read}, {"file_bytes", static_cast<int64_t>(bytes)}});
}

void log_counts(const std::string& name, const TokenCacheResult& r) {
  const FilterCounts& c = r.cache.counts();
  log::info("data",
            "{}: {} pairs read, {} kept; filtered: {} empty, {} invalid UTF-8, {} too long, {} "
            "over length ratio",
            name, c.read, c.kept(), c.empty, c.invalid_utf8, c.too_long, c.length_ratio);
  if (r.built && r.encode_seconds > 0) {
    log::info("data",
              "{}: encoded {} pairs in {:.2f} s ({:.0f} sentence pairs/s), cache written in "
              "{:.2f} s",
              name, c.read, r.encode_seconds, double(c.read) / r.encode_seconds, r.write_seconds);
  } else {
    log::info("data", "{}: token cache reused ({})", name, r.cache.path().string());
  }
}

}  // namespace

PreparedData prepare_data(const DataOptions& options, const std::filesystem::path& run_dir,
                          const PrepareOptions& prepare) {
  PreparedData data;
  const auto vocab_start = Clock::now();
  data.vocab = prepare_vocabularies(options, run_dir,
                                    {prepare.threads, static_cast<uint32_t>(prepare.seed)});
  if (data.vocab.trained)
    record_phase(run_dir, "vocabulary", seconds_since(vocab_start), {{"threads", prepare.threads}});
  log::info("data", "vocabulary: {} pieces{} ({})", data.vocab.src.size(),
            data.vocab.joint ? " (joint)" : "", data.vocab.src.model_path().string());
  const std::filesystem::path cache_dir = run_dir / "cache";
  // One token cache per corpus: "train" for the data.train_src shorthand (the name it always
  // had), "train-<name>" for each corpus of data.train.
  std::vector<CorpusPart> parts;
  for (const CorpusOptions& corpus : training_corpora(options)) {
    const std::string name = options.train.empty() ? "train" : "train-" + corpus.name;
    const std::string needed_by = "data.train entry " + corpus.name;
    TokenCacheResult result = build_or_open_token_cache(
        {name, corpus.src, corpus.tgt, cache_dir, prepare.threads,
         tag_ids(data.vocab.src, source_tags(options, corpus, data.vocab.src), needed_by),
         tag_ids(data.vocab.tgt, target_tags(options, corpus, data.vocab.tgt), needed_by)},
        data.vocab, options);
    log_counts(name, result);
    record_encoding(run_dir, name, result, prepare.threads);
    parts.push_back({corpus.name, corpus.weight, std::move(result.cache)});
  }
  data.train = CorpusSet(std::move(parts), options.sampling_temperature);
  if (data.train.parts().size() > 1) {
    const double t = options.sampling_temperature;
    for (const CorpusDraw& d : data.train.draws())
      log::info("data", "corpus {}: {} pairs x weight {}{} = {} pairs drawn per epoch", d.name,
                d.pairs, d.weight, t == 1.0 ? std::string() : fmt::format(", temperature {}", t),
                d.drawn);
  }
  for (const CorpusOptions& set : validation_sets(options)) {
    const std::string name = options.valid.empty() ? "valid" : "valid-" + set.name;
    const std::string needed_by = "data.valid entry " + set.name;
    std::vector<int32_t> tgt_prefix =
        tag_ids(data.vocab.tgt, target_tags(options, set, data.vocab.tgt), needed_by);
    TokenCacheResult result = build_or_open_token_cache(
        {name, set.src, set.tgt, cache_dir, prepare.threads,
         tag_ids(data.vocab.src, source_tags(options, set, data.vocab.src), needed_by), tgt_prefix},
        data.vocab, options);
    log_counts(name, result);
    record_encoding(run_dir, name, result, prepare.threads);
    data.valid.push_back(
        {set.name, pair_label(set), set.tgt, std::move(result.cache), std::move(tgt_prefix)});
  }
  return data;
}

int64_t resolve_update_freq(const DataOptions& options, int64_t max_tokens, int64_t world_size) {
  if (options.tokens_per_update <= 0) return options.update_freq;
  // In 128 bits: the config allows any int64 for both, and their product or sum overflowed.
  using Wide = __int128;
  const Wide per_step = Wide{world_size} * max_tokens;
  const Wide steps = std::max<Wide>(1, (Wide{options.tokens_per_update} + per_step - 1) / per_step);
  NMT_CHECK(steps <= kMaxUpdateFreq, ConfigError,
            "data.tokens_per_update ({}) needs {} steps of {} rank(s) x data.max_tokens {}: more "
            "than data.update_freq's limit of {}; lower it or raise data.max_tokens",
            options.tokens_per_update, static_cast<int64_t>(std::min<Wide>(steps, INT64_MAX)),
            world_size, max_tokens, kMaxUpdateFreq);
  return static_cast<int64_t>(steps);
}

BatchPlanOptions plan_options(const DataOptions& options, int64_t max_tokens, int64_t world_size,
                              uint64_t seed) {
  BatchPlanOptions p;
  p.max_tokens = max_tokens;
  p.max_sentences = options.max_sentences;
  p.batch_overhead = options.batch_overhead;
  p.world_size = world_size;
  p.accumulation = resolve_update_freq(options, max_tokens, world_size);
  p.seed = seed;
  p.batching = options.batching;
  return p;
}

std::vector<CorpusDraw> drawn_in_plan(const CorpusSet& corpora, const EpochPlan& plan) {
  std::vector<CorpusDraw> out = corpora.draws();
  for (CorpusDraw& d : out) d.drawn = 0;
  for (uint32_t pair : plan.pairs) ++out[corpora.part_of(pair)].drawn;
  return out;
}

std::string batch_stats_json(const PlanStats& ours, const PlanStats& naive, int64_t world_size,
                             int64_t max_tokens, int64_t update_freq, double plan_seconds,
                             const std::vector<CorpusDraw>& corpora, double temperature) {
  // Ratios to 4 decimals: more would only show the noise of a sample.
  const auto rounded = [](double v, double scale) { return std::round(v * scale) / scale; };
  const auto stats = [&rounded](const PlanStats& s) {
    return nlohmann::ordered_json{
        {"batches", s.batches},
        {"steps", s.steps},
        {"sentences", s.sentences},
        {"src_tokens", s.src_tokens},
        {"tgt_tokens", s.tgt_tokens},
        {"padded_tokens", s.padded_tokens},
        {"padding_efficiency", rounded(s.padding_efficiency, 1e4)},
        {"max_rank_token_imbalance", rounded(s.max_rank_token_imbalance, 1e4)},
        {"mean_batch_fill", rounded(s.mean_batch_fill, 1e4)},
        {"max_batch_fill", rounded(s.max_batch_fill, 1e4)}};
  };
  nlohmann::ordered_json o;
  o["world_size"] = world_size;
  o["max_tokens"] = max_tokens;
  o["update_freq"] = update_freq;
  o["epoch"] = 1;
  o["plan_seconds"] = rounded(plan_seconds, 1e3);
  if (temperature != 1.0) o["sampling_temperature"] = temperature;
  o.update(stats(ours));
  nlohmann::ordered_json drawn = nlohmann::ordered_json::array();
  for (const CorpusDraw& d : corpora)
    drawn.push_back(
        {{"name", d.name}, {"pairs", d.pairs}, {"weight", d.weight}, {"drawn", d.drawn}});
  o["corpora"] = std::move(drawn);
  o["naive"] = stats(naive);
  return json::pretty(o);
}

std::string batch_stats_table(const PlanStats& ours, const PlanStats& naive) {
  std::string t =
      fmt::format("{:<28} {:>16} {:>22}\n", "epoch 1", "token buckets", "naive (sentence count)");
  auto row = [&t](const char* name, const std::string& a, const std::string& b) {
    t += fmt::format("{:<28} {:>16} {:>22}\n", name, a, b);
  };
  auto num = [](int64_t v) { return fmt::format("{}", v); };
  auto real = [](double v) { return fmt::format("{:.4f}", v); };
  row("batches (per rank x steps)", num(ours.batches), num(naive.batches));
  row("steps", num(ours.steps), num(naive.steps));
  row("sentences", num(ours.sentences), num(naive.sentences));
  row("src / tgt tokens", fmt::format("{} / {}", ours.src_tokens, ours.tgt_tokens),
      fmt::format("{} / {}", naive.src_tokens, naive.tgt_tokens));
  row("padded tokens", num(ours.padded_tokens), num(naive.padded_tokens));
  row("padding efficiency", real(ours.padding_efficiency), real(naive.padding_efficiency));
  row("max rank token imbalance", real(ours.max_rank_token_imbalance),
      real(naive.max_rank_token_imbalance));
  row("mean batch fill", real(ours.mean_batch_fill), real(naive.mean_batch_fill));
  row("max batch fill", real(ours.max_batch_fill), real(naive.max_batch_fill));
  return t;
}

}  // namespace nmt::data
