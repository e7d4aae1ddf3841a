#pragma once
// The training loop as a coordinator: one rank's updates, from a fresh start or a checkpoint,
// until a stop condition; it logs at log steps, validates, checkpoints, and reports what the
// run did. Each concern is a component of its own, which the loop only calls: the update
// (updater.h), the saved state (training_state.h), validation (validator.h), progress and
// metrics (progress.h), the run summary (run_summary.h).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "data/batch_iterator.h"
#include "train/run_setup.h"
#include "train/run_summary.h"

namespace nmt::data {
struct PreparedData;
class BatchPlanner;
}
namespace nmt::checkpoint {
class CheckpointDir;
struct CheckpointData;
struct RunMetadata;
}

namespace nmt::train {

class Progress;
class Validator;
struct IntervalStats;
struct ValidationResult;

/// One rank's training loop.
class Trainer {
 public:
  /// Builds the update (model, optimizer, scaler; with several ranks, checks that they agree
  /// and broadcasts rank 0's parameters), the batch plan and, with validation data, the
  /// validator.
  Trainer(RunSetup setup, const data::PreparedData& data);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Restores the full training state saved in a checkpoint, on any number of ranks and
  /// update_freq (the data position is mapped so that no pair of the epoch is repeated or
  /// skipped). Throws CheckpointError naming the mismatch when it does not fit this model or
  /// vocabulary.
  void restore(const checkpoint::CheckpointData& saved, const std::filesystem::path& file);
  /// Fine-tuning: starts from the model parameters of another run's checkpoint (see
  /// load_initial_parameters in training_state.h); everything else starts fresh.
  void initialize_from(const checkpoint::CheckpointData& saved, const std::filesystem::path& file);
  /// Trains until train.max_steps, train.max_epochs, train.max_minutes, early stopping or
  /// SIGINT/SIGTERM, then validates and writes a final checkpoint; every rank returns the
  /// summary (parameter hashes and peak memory of every rank included) with the fields the
  /// trainer owns filled; the job's (kind, world_size, max_tokens, wall_s...) are left to it.
  RunSummary run();

 private:
  /// Where the data continues after restoring `meta`, mapped to this job's ranks and
  /// update_freq when they differ from the saved ones.
  data::IteratorState continue_data_position(const checkpoint::RunMetadata& meta,
                                             const std::filesystem::path& file) const;
  std::optional<StopReason> should_stop(const Progress& progress);
  /// Why a run that `stop`s before its first update has nothing to do (at max_steps, past
  /// max_epochs, out of patience), or nullopt.
  std::optional<std::string> already_done(std::optional<StopReason> stop) const;
  /// train.max_steps or train.max_epochs reached, or nullopt.
  std::optional<StopReason> limit_reached() const;
  /// Rank 0: moves the checkpoints of steps after this run's start out of its way, and their
  /// records in metrics.jsonl and tensorboard/ with them.
  void set_aside_later_checkpoints() const;
  double log_interval(Progress& progress, IntervalStats& interval, int64_t epoch);
  ValidationResult validate(Progress& progress, int64_t epoch);
  void save(int64_t epoch, const std::optional<ValidationResult>& validation,
            const Progress& progress);
  /// The summary with the fields the trainer owns (run_summary.h), from every rank.
  RunSummary finish(StopReason stop_reason, int64_t epoch, std::optional<double> last_train_loss);

  RunSetup setup_;
  const data::PreparedData& data_;
  std::unique_ptr<Updater> updater_;
  std::unique_ptr<Validator> validator_;  ///< null without validation data
  std::unique_ptr<checkpoint::CheckpointDir> checkpoints_;
  std::shared_ptr<const data::BatchPlanner> planner_;
  int64_t step_ = 0;                 ///< updates done
  int64_t first_step_ = 0;           ///< step this run started at
  data::IteratorState iterator_;     ///< where the data continues
  double elapsed_before_ = 0;        ///< training time of the runs this one continues (s)
  std::optional<double> last_valid_loss_;
  std::filesystem::path last_checkpoint_;
  std::optional<std::filesystem::path> resumed_from_;
  int64_t run_tokens_ = 0;           ///< real tokens this rank trained on in this run
  double train_seconds_ = 0;         ///< time spent in updates (validation, checkpoints excluded)
  double validation_seconds_ = 0;    ///< time spent validating in this run
  double checkpoint_seconds_ = 0;    ///< time spent saving checkpoints in this run
};

}  // namespace nmt::train
