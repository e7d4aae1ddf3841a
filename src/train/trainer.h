#pragma once
// The training loop as a coordinator: it owns the model, optimizer, loss scaler and data
// iterator of one rank, runs updates, logs, validates, and saves and restores the full state
// through checkpoints so that a resumed run continues bit for bit.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <c10/core/Device.h>

#include "amp/amp_options.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_file.h"
#include "checkpoint/checkpoint_options.h"
#include "data/data_options.h"
#include "data/prepare.h"
#include "dist/dist_options.h"
#include "model/model_options.h"
#include "train/benchmark.h"
#include "train/train_options.h"

namespace nmt::dist {
class Communicator;
}

namespace nmt::train {

/// Everything a Trainer is built from.
struct TrainerSetup {
  model::ModelOptions model;
  data::DataOptions data;
  TrainOptions train;
  amp::AmpOptions amp;
  checkpoint::CheckpointOptions checkpoint;
  dist::DistOptions dist;          ///< bucket size and overlap of the gradient all-reduce
  std::filesystem::path run_dir;   ///< checkpoints/ and metrics.jsonl go here
  std::string config_yaml;         ///< effective config, stored in every checkpoint
  std::string config_hash;         ///< config_hash() of it
  int64_t rank = 0;                ///< this process's rank
  int64_t world_size = 1;          ///< ranks in the job
  c10::Device device = c10::Device(c10::kCPU);  ///< where the model trains
  /// The process group of the ranks (null for one process): gradients are summed over it.
  std::shared_ptr<dist::Communicator> communicator;
};

/// How a run starts: fresh, from the newest valid checkpoint of the run, or from a file.
struct ResumeFrom {
  enum class Mode { kNone, kAuto, kPath };
  Mode mode = Mode::kAuto;
  std::filesystem::path path;  ///< for kPath
};

/// What a finished run reports.
struct TrainSummary {
  int64_t steps = 0;                       ///< updates done in total (including resumed ones)
  int64_t epoch = 0;                       ///< epoch of the last update
  double last_train_loss = 0;              ///< per-token loss of the last logged interval
  std::optional<double> last_valid_loss;   ///< per-token validation loss, if validated
  bool stopped_by_signal = false;          ///< SIGINT/SIGTERM ended the run early
  bool early_stopped = false;              ///< train.patience validations without improvement
  std::filesystem::path last_checkpoint;   ///< checkpoint written at the end
};

/// What data.max_tokens: auto measured (Trainer::fit_max_tokens).
struct MaxTokensFit {
  int64_t max_tokens = 0;      ///< the budget every rank uses: the smallest rank's fit
  int64_t sentences = 0;       ///< this rank's fit: sentences of `length` tokens
  int64_t length = 0;          ///< longest training sentence with BOS/EOS (tokens)
  double peak_mb = 0;          ///< measured peak of this rank's fitting step (MiB)
  double memory_mb = 0;        ///< memory this rank fits into (MiB), before the fraction
  double limit_mb = 0;         ///< memory_mb x data.auto_memory_fraction (MiB)
  int64_t probes = 0;          ///< training steps measured
  double seconds = 0;          ///< time the measurement took
  std::string fallback;        ///< non-empty: nothing measured, and why (max_tokens is 4096,
                               ///< or data.max_len + 2 when larger)
};

class TrainerImpl;

/// One rank's training loop.
class Trainer {
 public:
  /// Builds model, optimizer and scaler for the prepared data; with several ranks, checks
  /// that all ranks have the same config, vocabulary and parameter count (DistError naming
  /// the ranks otherwise) and broadcasts rank 0's parameters.
  Trainer(TrainerSetup setup, const data::PreparedData& data);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Restores the full training state saved in a checkpoint. Throws CheckpointError naming
  /// the mismatch when it does not fit this model, vocabulary or world size.
  void restore(const checkpoint::CheckpointData& saved, const std::filesystem::path& file);
  /// Trains until train.max_steps, train.max_epochs, train.max_minutes or SIGINT/SIGTERM,
  /// then writes a final checkpoint.
  TrainSummary run();
  /// data.max_tokens: auto. Measures the peak memory of training steps (forward, loss and
  /// backward under the configured amp mode, with the optimizer state and gradients alive) on
  /// batches of the corpus's longest length, the most memory a batch of a given token budget
  /// can take, and returns the largest budget whose peak stays within
  /// data.auto_memory_fraction of the memory: data.auto_memory_mb, or the GPU's free memory
  /// shared by the `ranks_per_device` ranks on it. Every rank must call it; all get the
  /// smallest rank's fit. Parameters stay as they were, but random streams and gradients do
  /// not: build the Trainer anew with the result. On CPU without data.auto_memory_mb there
  /// is no limit to fit, and it returns 4096 with the reason. Throws ConfigError on every
  /// rank, naming the rank, when a rank cannot fit even one sentence of the longest length.
  MaxTokensFit fit_max_tokens(int64_t ranks_per_device);
  /// Benchmark mode: options.warmup untimed then options.steps timed updates from a fresh
  /// start (no checkpoints, no validation), every phase timed with a device sync. Every rank
  /// takes part; the result sums tokens and FLOPs over ranks. With options.dump_batches,
  /// rank 0 also writes its batches and the initial parameters there.
  BenchmarkResult benchmark(const BenchmarkOptions& options);

 private:
  std::unique_ptr<TrainerImpl> impl_;
};

/// The checkpoint a run resumes from: none, the newest valid one under run_dir/checkpoints
/// (bad newer files are skipped with a warning), or the given file (which must load).
std::optional<std::pair<std::filesystem::path, checkpoint::CheckpointData>> find_resume_checkpoint(
    const std::filesystem::path& run_dir, const checkpoint::CheckpointOptions& options,
    const ResumeFrom& from, const checkpoint::CheckpointFilter& reject = {});

/// Installs SIGINT/SIGTERM handlers that ask the running loop to stop after the current update
/// (a second signal ends the process at once).
void install_stop_handlers();
/// True once a stop was requested.
bool stop_requested();

}  // namespace nmt::train
