#pragma once
// data.max_tokens: auto, the whole protocol in one place (Marian's mini-batch-fit, done by
// measurement). Each rank builds an Updater of its own (model, optimizer, scaler and
// gradient buckets, no data pipeline), runs forward, loss and backward in the configured amp
// mode on batches of the corpus's longest sentences, the most memory any batch of a given
// token budget can take, and searches (batch_fit.h) the largest budget whose peak stays
// within data.auto_memory_fraction of the memory: data.auto_memory_mb, or the GPU's free
// memory shared by the ranks on it. The ranks then all-gather their fits and all take the
// smallest. Nothing else in the project asks whether max_tokens is auto.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>  // json.hpp in sources only: ~1-2 s each
#include "data/data_options.h"
#include "train/batch_fit.h"

namespace nmt::data {
struct PreparedData;
}

namespace nmt::train {

struct RunSetup;

/// What data.max_tokens: auto measured.
struct MaxTokensFit {
  int64_t max_tokens = 0;      ///< the budget every rank uses: the smallest rank's fit
  int64_t sentences = 0;       ///< this rank's fit: sentences of `length` tokens
  int64_t length = 0;          ///< longest training sentence with BOS/EOS (tokens)
  double peak_mb = 0;          ///< measured peak of this rank's fitting step (MiB)
  double memory_mb = 0;        ///< memory this rank fits into (MiB), before the fraction
  double headroom_mb = 0;      ///< left for NCCL's own buffers, outside any peak (MiB)
  double limit_mb = 0;         ///< (memory_mb - headroom_mb) x data.auto_memory_fraction (MiB)
  std::vector<BatchProbe> probes;  ///< every step measured, in order
  double seconds = 0;          ///< time the measurement took
  std::string fallback;        ///< non-empty: nothing measured, and why (max_tokens is then
                               ///< unmeasured_max_tokens())

  /// For summary.json: every figure above, probes as {sentences, peak_mb or null}.
  nlohmann::ordered_json to_json() const;
};

/// data.max_tokens as a number, and how it was chosen.
struct MaxTokensChoice {
  int64_t max_tokens = 0;           ///< the budget of every rank's batches
  std::optional<MaxTokensFit> fit;  ///< set when it was auto
};

/// `configured` (data.max_tokens), or with auto (nullopt) the fit measured on `measuring` (a
/// setup of the run in its precision; its max_tokens is not read); logs what auto chose. With
/// auto every rank must call it (it all-gathers). `ranks_per_device` ranks share one GPU's free
/// memory. Throws ConfigError on every rank, naming the rank, when a rank cannot fit even one
/// sentence of the longest length.
MaxTokensChoice choose_max_tokens(std::optional<int64_t> configured, const RunSetup& measuring,
                                  const data::PreparedData& data, int64_t ranks_per_device);

/// The budget that auto stands for where nothing is measured (a dry run, CPU without
/// auto_memory_mb) and while measuring: 4096, or max_len + 2 when sentences may be longer.
int64_t unmeasured_max_tokens(const data::DataOptions& options);

/// For a dry run, which measures nothing: the configured number, or unmeasured_max_tokens()
/// with a log line saying so.
int64_t max_tokens_to_plan(const data::DataOptions& options);

/// "4096", or "auto (measured at start)", for the plan a run logs.
std::string describe_max_tokens(const data::DataOptions& options);

}  // namespace nmt::train
