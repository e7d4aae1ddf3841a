#pragma once
// Preparing the data of a run once: vocabularies, token caches, and the numbers that follow
// from the batching settings.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "data/batch_plan.h"
#include "data/corpus_set.h"
#include "data/data_options.h"
#include "data/token_cache.h"
#include "data/vocab.h"

namespace nmt::data {

/// A named validation set.
struct ValidationSet {
  std::string name;  ///< "valid" for data.valid_src, else its data.valid name
  std::string pair;  ///< its language pair, "en-de"; empty when it names none
  std::string tgt;   ///< its target file (the references of BLEU and chrF)
  TokenCache cache;
  /// The tags its targets start with (an M2M100 or NLLB vocabulary's target-language code):
  /// validation's search forces them first. Empty: none.
  std::vector<int32_t> tgt_prefix;
};

/// Vocabularies and encoded corpora of a run.
struct PreparedData {
  Vocabularies vocab;
  CorpusSet train;  ///< the training corpora, one token cache each
  std::vector<ValidationSet> valid;  ///< data.valid, or data.valid_src's set; may be empty
};

/// How to prepare.
struct PrepareOptions {
  int threads = 1;     ///< encoding and SentencePiece training threads
  uint64_t seed = 1;   ///< seed for SentencePiece sampling
};

/// Trains or loads the vocabularies and builds or opens the token caches under run_dir, and
/// logs what was read and filtered, per reason. A SIGINT or SIGTERM while a cache is encoded
/// stops the encoding with its temporary files removed, then ends the process as the signal
/// would have (build_or_open_token_cache).
PreparedData prepare_data(const DataOptions& options, const std::filesystem::path& run_dir,
                          const PrepareOptions& prepare);

/// The most batches an update may accumulate (data.update_freq's upper bound).
inline constexpr int64_t kMaxUpdateFreq = int64_t{1} << 16;

/// Batches accumulated per update: data.update_freq, or the smallest number of steps whose
/// budget (world_size x max_tokens each) reaches data.tokens_per_update when that is set.
/// `max_tokens` is data.max_tokens as a number (auto resolved by train/max_tokens_fit.h).
/// Throws ConfigError when that is more than kMaxUpdateFreq steps.
int64_t resolve_update_freq(const DataOptions& options, int64_t max_tokens, int64_t world_size);

/// The batch plan settings that follow from the data options, with batches of `max_tokens`
/// padded tokens (data.max_tokens as a number).
BatchPlanOptions plan_options(const DataOptions& options, int64_t max_tokens, int64_t world_size,
                              uint64_t seed);

/// Per corpus: its pairs, weight, and the pairs `plan` trains on (counted in the plan).
std::vector<CorpusDraw> drawn_in_plan(const CorpusSet& corpora, const EpochPlan& plan);

/// batch_stats.json: the plan of an epoch next to naive sentence-count batching, and the
/// pairs it draws from each corpus (with the sampling temperature when it is not 1).
std::string batch_stats_json(const PlanStats& ours, const PlanStats& naive, int64_t world_size,
                             int64_t max_tokens, int64_t update_freq, double plan_seconds,
                             const std::vector<CorpusDraw>& corpora, double temperature = 1.0);
/// A short table of the same figures for the console.
std::string batch_stats_table(const PlanStats& ours, const PlanStats& naive);

}  // namespace nmt::data
