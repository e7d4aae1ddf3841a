#pragma once
// amp.mode auto on a CPU with bf16 instructions (amp/amp_choice.h): times the run's own model
// in fp32 and in bf16 at start. Each rank builds two Updaters (model, optimizer, gradients),
// one per precision, and times forward, loss and backward of its first batches of epoch 1,
// each batch in both precisions in turn, so that load on the machine hits both alike; the mean
// step over the same batches counts. Real batches, not one synthetic shape: on a 2-core AMX
// Xeon tiny's bf16 step was 1.10x faster than fp32's on one fixed shape but 0.74x as fast on
// the corpus's batches, whose shapes change from batch to batch (docs/performance-log.md). The
// first batches of each precision are untimed (first-call allocations, kernel creation).
// Every rank times at once, so ranks that share a machine share it as in training; rank 0's
// means decide for all (job/amp_agreement.h hands rank 0's decision to every rank). The Updaters seed the random generator from train.seed as the
// run's own does after them, and the batches come from an iterator of their own, so timing
// leaves training as it would have been without it: the same parameters, optimizer state and
// random state after the same updates (tests/job/test_amp_agreement.cpp compares them).
//
//   const train::AmpTiming t = train::time_amp_modes(setup, data);
//   const amp::AmpChoice choice = amp::decide_by_timing(pending, t.fp32_s, t.bf16_s);

#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>  // json.hpp in sources only: ~1-2 s each

namespace nmt::data {
struct PreparedData;
}

namespace nmt::train {

struct RunSetup;

/// How long the timing may take.
struct AmpTimingOptions {
  int warmup = 2;            ///< untimed batches per precision
  int rounds = 8;            ///< timed batches per precision at most
  double budget_s = 30.0;    ///< no round starts after this (the first always runs)
};

/// What time_amp_modes measured.
struct AmpTiming {
  int64_t warmup = 0;               ///< untimed batches per precision
  int64_t padded_tokens = 0;        ///< of this rank's timed batches (source + target)
  std::vector<double> fp32_steps;   ///< this rank's timed steps in fp32 (seconds)
  std::vector<double> bf16_steps;   ///< and in bf16, batch by batch the same
  double fp32_s = 0;                ///< this rank's mean fp32 step (rank 0's decides)
  double bf16_s = 0;                ///< this rank's mean bf16 step
  double seconds = 0;               ///< time the timing took on this rank

  /// For summary.json: every figure above.
  nlohmann::ordered_json to_json() const;
};

/// Times a step of `setup`'s model in fp32 and bf16 on this rank. With several ranks every
/// rank must call it: its two Updaters check that the ranks agree and take rank 0's
/// parameters, as the run's own does (their gradients are not summed over ranks).
AmpTiming time_amp_modes(const RunSetup& setup, const data::PreparedData& data,
                         const AmpTimingOptions& options = {});

}  // namespace nmt::train
