#pragma once
// What a training run tells people and scripts as it goes: a live progress line on a
// terminal between log lines, and one log line plus one metrics.jsonl record per log interval
// and per validation, with elapsed time and ETA. Pure reporting: the figures come summed
// over the ranks already (trainer.cpp reduces them), and only rank 0 prints and writes.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

#include "train/metrics_log.h"
#include "train/train_options.h"
#include "train/validator.h"
#include "util/phase_progress.h"

namespace nmt::amp {
struct ScalerStats;
}

namespace nmt::train {

/// One log interval's figures, summed over the ranks.
struct IntervalTotals {
  double loss_sum = 0;        ///< summed per-token losses
  double nll_sum = 0;         ///< summed negative log-likelihoods
  double tgt_tokens = 0;      ///< real target tokens
  double src_tokens = 0;      ///< real source tokens
  double padded_tokens = 0;   ///< source + target positions computed
  double seconds = 0;         ///< wall time of the interval, validation and checkpoints excluded
  /// This rank's split of that time (seconds).
  double data_wait_s = 0, forward_s = 0, backward_s = 0, sync_s = 0, optimizer_s = 0;
  /// Whether the split is the phases' own time: on a CPU the work runs as the host calls it;
  /// on a GPU training never waits for the device, so the host's times are how long it took
  /// to queue the work, and the record leaves the split out (null, with time_split saying so).
  bool split_measured = true;
  /// Updates skipped so far in this run because a rank ran out of memory (all ranks agree).
  int64_t oom_skipped_updates = 0;
};

/// Progress of one rank's run.
class Progress {
 public:
  /// `first_step` is the step the run starts (or resumes) at; `elapsed_before` the training
  /// time of earlier runs that this one continues (seconds).
  Progress(const TrainOptions& options, int64_t rank, const std::filesystem::path& metrics_file,
           int64_t first_step, double elapsed_before);

  /// After each update: redraws the live line (rank 0, on a terminal).
  void tick(int64_t step);
  /// Removes the live line before other output.
  void clear();
  /// The log line and metrics record of an interval; returns its per-token loss.
  double interval(int64_t step, int64_t epoch, const IntervalTotals& totals,
                  const amp::ScalerStats& scaler, double grad_norm, double peak_mb);
  /// The log line and metrics record of a validation.
  void validation(int64_t step, int64_t epoch, const ValidationResult& result);
  /// Training time including earlier runs (seconds).
  double elapsed() const;
  /// Wall time of this run so far (seconds).
  double run_seconds() const;

 private:
  double eta_seconds(int64_t step) const;

  TrainOptions options_;
  bool live_ = false;  ///< draw the live line
  MetricsLog metrics_;
  int64_t first_step_;
  double elapsed_before_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  int64_t skipped_logged_ = 0;  ///< skipped updates already warned about
};

}  // namespace nmt::train
