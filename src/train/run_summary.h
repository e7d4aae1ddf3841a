#pragma once
// <run_dir>/summary.json: what a run did, for scripts (written by rank 0 at the end of every
// run: training, benchmark, dry run). Scripts read it, and benchmark.json and
// batch_stats.json, instead of log lines meant for people.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "train/max_tokens_fit.h"
#include "util/json_text.h"

namespace nmt::train {

/// Why a training run ended.
enum class StopReason {
  kMaxSteps,     ///< train.max_steps reached
  kMaxEpochs,    ///< train.max_epochs done
  kMaxMinutes,   ///< train.max_minutes reached
  kSignal,       ///< SIGINT or SIGTERM
  kEarlyStop,    ///< train.patience validations without improvement
  kAlreadyDone,  ///< resumed at max_steps, past max_epochs or out of patience: nothing to do
  kCompleted,    ///< not a training run (benchmark, dry run): it ran to its end
};

/// The name summary.json gives a stop reason ("max_steps", "signal", ...).
const char* stop_reason_name(StopReason reason);

/// What a run was: summary.json's "kind", and the key of its `details`.
enum class RunKind {
  kTrain,      ///< "train": the training loop
  kBenchmark,  ///< "benchmark": --benchmark, timed updates
  kDryRun,     ///< "dry_run": --dry-run, the data and batch plan only
};

/// The name summary.json gives a run kind ("train", "benchmark", "dry_run").
const char* run_kind_name(RunKind kind);

/// What summary.json holds. Each field has one owner, which fills it once:
/// - the job (job/train_job.cpp, job/dry_run.cpp), for every kind of run: kind, world_size,
///   max_tokens, max_tokens_fit, amp_* (amp_timing included), wall_s (the whole process's run, setup included) and details;
/// - what ran the updates, for the rest: Trainer::run (trainer.h) when training, which leaves
///   the job's fields at their defaults; the job's benchmark (final_step, peak_memory_mb,
///   tokens_per_s). A dry run runs no update: those fields keep their defaults.
struct RunSummary {
  RunKind kind = RunKind::kTrain;
  StopReason stop_reason = StopReason::kCompleted;
  int64_t final_step = 0;         ///< updates done in total (resumed ones included)
  int64_t oom_skipped_updates = 0;  ///< of this run's, skipped: a rank ran out of memory
  int64_t epoch = 0;              ///< epoch of the last update
  int64_t world_size = 1;         ///< ranks
  std::vector<std::string> parameter_hashes;  ///< per rank: XXH64 of the final parameters
  std::vector<double> peak_memory_mb;         ///< per rank: GPU max allocated or host max RSS
  int64_t max_tokens = 0;                     ///< the budget of each rank's batches
  std::optional<MaxTokensFit> max_tokens_fit; ///< with data.max_tokens: auto
  std::string amp_mode = "off";               ///< the precision in effect (amp.mode resolved)
  bool amp_auto = false;                      ///< it was chosen by amp.mode auto
  std::string amp_reason;                     ///< why ("as configured", or auto's reason)
  std::optional<nlohmann::ordered_json>
      amp_timing;                             ///< what auto timed (train/amp_timing.h), if it did
  std::optional<std::string> resumed_from;    ///< checkpoint file this run started from
  std::optional<int64_t> resumed_step;        ///< its step
  std::optional<double> last_train_loss;      ///< per-token loss of the last logged interval
  std::optional<double> last_valid_loss;      ///< per-token loss of the last validation
  std::string last_checkpoint;                ///< checkpoint written at the end ("" if none)
  int64_t tokens = 0;             ///< real (source + target) tokens this run trained on, all ranks
  double tokens_per_s = 0;        ///< real (source + target) tokens per second, all ranks,
                                  ///< over this run's training time (validation excluded)
  double train_s = 0;             ///< rank 0's time in updates (what tokens_per_s divides by)
  double validation_s = 0;        ///< rank 0's time validating, outside train_s
  double checkpoint_s = 0;        ///< rank 0's time writing checkpoints, outside train_s
  double wall_s = 0;              ///< wall time of this process's run
  nlohmann::ordered_json details;  ///< kind-specific figures (benchmark, dry run), written
                                   ///< under the kind's name
};

/// The JSON text of a summary.
std::string run_summary_json(const RunSummary& summary);

/// Writes <run_dir>/summary.json atomically (a temp file renamed over it).
void write_run_summary(const std::filesystem::path& run_dir, const RunSummary& summary);

}  // namespace nmt::train
