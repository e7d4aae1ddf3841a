#pragma once
// One optimizer update of one rank, and nothing around it. The Updater owns the model, the
// Adam optimizer, the fp16 loss scaler, the gradient all-reduce and the parameters' moving
// average (train.ema_decay); update() runs forward,
// loss and backward over update_freq batches, sums the gradients over the ranks, unscales,
// clips and steps. The loop (trainer.h), the benchmark (benchmark_run.h) and the max_tokens
// auto fit (max_tokens_fit.h) all train through it, so an update has one definition.
//
//   Updater updater(setup);                      // same initial parameters on every rank
//   IntervalStats interval = IntervalStats::zero(device);
//   for (int64_t step = 1; ...; ++step) updater.update(step, next_batch, interval, log_step);

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "amp/amp_options.h"
#include "data/batch_tensors.h"
#include "dist/dist_options.h"
#include "model/model_options.h"
#include "train/oom_skip.h"
#include "train/train_options.h"

namespace nmt::dist {
class Communicator;
}
namespace nmt::model {
class Transformer;
}
namespace nmt::amp {
class DynamicLossScaler;
}

namespace nmt::train {

class ParameterOptimizer;
class ParameterAverage;

/// What an Updater is built from.
struct UpdaterSetup {
  model::ModelOptions model;
  TrainOptions train;
  amp::AmpOptions amp;             ///< the loss scaler's settings
  amp::AmpMode precision = amp::AmpMode::kOff;  ///< the mode autocast and the scaler run in
  dist::DistOptions dist;          ///< bucket size and overlap of the gradient all-reduce
  int64_t src_vocab_size = 0;      ///< pieces of the source vocabulary
  int64_t tgt_vocab_size = 0;      ///< pieces of the target vocabulary
  int64_t pad_id = 0;              ///< padding id (source and target)
  int64_t max_tokens = 4096;       ///< data.max_tokens, resolved (bounds the fp16 loss divisor)
  int64_t update_freq = 1;         ///< batches per update
  int64_t rank = 0;                ///< this process's rank
  int64_t world_size = 1;          ///< ranks in the job
  c10::Device device = c10::Device(c10::kCPU);  ///< where the model trains
  /// The process group of the ranks (null for one process): gradients are summed over it.
  std::shared_ptr<dist::Communicator> communicator;
  /// What every rank must have alike besides the parameter count (config hash, vocabulary
  /// fingerprint): checked when several ranks start.
  std::string identity;
  /// Allocation failures to inject (NMT_FAULT_OOM, train/oom_skip.h): tests and drills.
  std::vector<OomFault> oom_faults;
};

/// Figures of the updates between two log lines. Losses stay on the device until read.
struct IntervalStats {
  at::Tensor loss_sum;        ///< device scalar: summed per-token losses (unnormalized)
  at::Tensor nll_sum;         ///< device scalar: summed negative log-likelihoods
  int64_t tgt_tokens = 0;     ///< real target tokens of this rank
  int64_t src_tokens = 0;     ///< real source tokens of this rank
  int64_t padded_tokens = 0;  ///< source + target positions computed by this rank
  int64_t updates = 0;        ///< updates done
  int64_t oom_skips = 0;      ///< of those, skipped by every rank: a rank ran out of memory
  double data_wait_s = 0, forward_s = 0, backward_s = 0, sync_s = 0, optimizer_s = 0;
  double flops = 0;           ///< model FLOPs of this rank's batches on real tokens
  double kernel_flops = 0;    ///< FLOPs of the padded shapes, every score (model/flops.h)
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  /// Empty figures, starting now, with loss sums on `device`.
  static IntervalStats zero(c10::Device device);
  /// Adds the counts and times of `other` (not its loss sums).
  void add_counts(const IntervalStats& other);
};

/// Where the data stands after an update.
struct UpdatePosition {
  int64_t epoch = 1;            ///< epoch of the update's last batch
  data::IteratorState next;     ///< where the next batch comes from (for checkpoints)
};

/// Yields this rank's next batch.
using BatchSource = std::function<data::BatchTensors()>;

/// One rank's model, optimizer, loss scaler and gradient all-reduce.
class Updater {
 public:
  /// Builds the model from train.seed (the same on every rank), then seeds this rank's own
  /// random stream (dropout). With several ranks, checks that all have the same identity and
  /// parameter count (DistError naming the ranks otherwise) and broadcasts rank 0's
  /// parameters.
  explicit Updater(UpdaterSetup setup);
  ~Updater();
  Updater(const Updater&) = delete;
  Updater& operator=(const Updater&) = delete;

  /// One optimizer update over update_freq batches from next_batch; `step` is its 1-based
  /// number (for the learning rate). The gradient norm is computed when clipping or when
  /// want_grad_norm (for a log line). Adds its figures to `interval`. When a rank runs out of
  /// memory in forward or backward, every rank skips the update together (oom_skip.h): no
  /// step, the batches are dropped; train.max_oom_skips in a row throw nmt::Error.
  UpdatePosition update(int64_t step, const BatchSource& next_batch, IntervalStats& interval,
                        bool want_grad_norm);
  /// Forward, loss and backward of one batch under the configured amp mode, the gradients
  /// left in place and not summed over ranks: what max_tokens auto measures.
  void forward_backward(const data::BatchTensors& batch);
  /// Clears the gradients (with several ranks: zeroes them in the all-reduce's buckets, where
  /// they live; dist/gradient_reducer.h).
  void zero_grad();
  /// Benchmark mode: wait for the device after each phase, so each phase's time is its own.
  void set_sync_phases(bool sync);
  /// With several ranks: whether backward launches the all-reduce (false while probing).
  void set_gradient_sync(bool sync);

  model::Transformer& model();
  ParameterOptimizer& optimizer();
  /// The moving average of the parameters (train.ema_decay > 0), updated after every
  /// optimizer step; null when train.ema_decay is 0.
  ParameterAverage* average();
  amp::DynamicLossScaler& scaler();
  const UpdaterSetup& setup() const;
  /// Norm of the last update's gradients (device scalar; undefined when none was computed).
  const at::Tensor& last_grad_norm() const;
  /// Peak memory of this rank so far (MiB): allocated on its GPU, or resident on the host.
  double peak_memory_mb() const;
  /// Updates skipped so far because a rank ran out of memory (the same on every rank).
  int64_t oom_skipped_updates() const;
  /// Waits for the device in benchmark mode (see set_sync_phases); no-op otherwise.
  void sync_for_timing() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace nmt::train
