#pragma once
// Benchmark mode (nmt-train --benchmark N): timed training updates on real or synthetic
// batches, reported with the split of a step, peak memory and model FLOPs utilization: MFU is
// model FLOPs on real tokens (model/flops.h) against the hardware's peak (hardware_peak.h:
// datasheet, or unknown), and beside it, named, the fraction of the matrix-multiply ceiling
// the benchmark measures itself on the same hardware.
//
// The same report comes from scripts/bench/reference_train.py (a plain PyTorch loop fed the
// batches that --dump-batches writes), so scripts/bench/compare.sh can set the two side by side.

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "amp/amp_options.h"

namespace nmt::train {

/// What --benchmark runs.
struct BenchmarkOptions {
  int64_t steps = 0;               ///< timed updates
  int64_t warmup = 5;              ///< untimed updates before them (allocator, caches, clocks)
  /// Updates of a second pass that waits for the device at every phase boundary, for the
  /// step split and step times; 0: they come from the timed pass itself (exact on a CPU,
  /// where work is synchronous; host enqueue times on a GPU).
  int64_t phase_steps = 0;
  bool synthetic = false;          ///< fixed-shape batches of random ids instead of the corpus
  int64_t synthetic_length = 0;    ///< tokens per source and target sentence; 0: data.max_len / 2
  std::filesystem::path dump_batches;  ///< if set, rank 0 writes its batches and initial
                                       ///< parameters here (safetensors) for the reference loop
};

/// Per-step medians and spreads, and the totals they come from.
struct StepTimes {
  double median = 0, mean = 0, min = 0, max = 0, p10 = 0, p90 = 0;  ///< seconds
};

/// What a benchmark measured, over all ranks.
struct BenchmarkResult {
  int64_t ranks = 1;
  int64_t threads = 1;               ///< intra-op threads per rank
  std::string device;                ///< "cpu", "cuda:0", ...
  std::string amp;                   ///< amp mode name
  bool synthetic = false;
  int64_t warmup = 0;
  int64_t steps = 0;                 ///< timed updates
  int64_t update_freq = 1;
  int64_t parameters = 0;
  /// Wall time of the timed updates (rank 0): the headline pass, which waits for the device
  /// only at its start and end, as training does.
  double seconds = 0;
  double real_tokens = 0;            ///< source + target tokens without padding, all ranks
  double target_tokens = 0;          ///< target tokens without padding, all ranks
  double padded_tokens = 0;          ///< source + target positions computed, all ranks
  /// The pass that timed the phases: the headline pass itself, or a separate one.
  bool separate_phase_pass = false;
  bool phases_synced = true;         ///< whether phase times include the device's work
  int64_t phase_steps = 0;           ///< its updates
  double phase_seconds = 0;          ///< its wall time (rank 0)
  double phase_real_tokens = 0;      ///< its source + target tokens, all ranks
  StepTimes step_time;               ///< per update of the phase pass (rank 0)
  /// Mean seconds per update of each phase in the phase pass (rank 0): data wait, forward,
  /// backward, gradient all-reduce (what backward did not hide), optimizer (unscale, clip,
  /// Adam).
  double data_wait_s = 0, forward_s = 0, backward_s = 0, grad_sync_s = 0, optimizer_s = 0;
  std::vector<double> peak_memory_mb;  ///< per rank: CUDA max allocated, or host max RSS
  double flops_per_step = 0;         ///< model FLOPs of a mean update on real tokens, all ranks
  double kernel_flops_per_step = 0;  ///< FLOPs of the padded shapes, every score, all ranks
  double hardware_peak_tflops = 0;   ///< the hardware's peak, summed over ranks; 0: unknown
  std::string hardware_peak_source;  ///< where it comes from, or why it is unknown
  double peak_tflops = 0;            ///< measured matmul ceiling, summed over ranks
  std::string peak_method;           ///< how the ceiling was measured
  double first_loss = 0;             ///< per-token loss of the first update, for cross-checks
  double last_loss = 0;              ///< per-token loss of the last update

  double tokens_per_s() const { return real_tokens / seconds; }
  /// Tokens per second of the phase pass: below the headline by what the syncs cost.
  double phase_tokens_per_s() const { return phase_real_tokens / phase_seconds; }
  double padded_tokens_per_s() const { return padded_tokens / seconds; }
  /// Model FLOPs on real tokens per second (TFLOP/s).
  double achieved_tflops() const { return flops_per_step * double(steps) / seconds / 1e12; }
  /// Model FLOPs utilization: achieved against the hardware's peak; NaN when that is unknown.
  double mfu() const {
    return hardware_peak_tflops > 0 ? achieved_tflops() / hardware_peak_tflops : std::nan("");
  }
  /// Achieved against the measured matmul ceiling (not the hardware's peak).
  double matmul_ceiling_fraction() const {
    return peak_tflops > 0 ? achieved_tflops() / peak_tflops : std::nan("");
  }
};

/// Median, mean, extremes and 10th/90th percentiles of the samples (not empty).
StepTimes summarize_step_times(std::vector<double> seconds);

/// The side of the square products measure_peak_tflops times: from 256, doubled while one
/// product of the current size takes under seconds / 8 (`product_seconds(n)` times one), up
/// to `largest`. Apart from the device so that the rule is tested with chosen timings: which
/// size a real device reaches depends on how fast it is.
int64_t matmul_peak_size(const std::function<double(int64_t)>& product_seconds, double seconds,
                         int64_t largest);

/// Peak matrix-multiply throughput of this process (TFLOP/s) in the precision the AMP mode
/// computes products in (float32 when off): the best of repeated square products, run for
/// about `seconds`. Their size (matmul_peak_size) grows from 256 while one product takes
/// under seconds / 8, up to 2048 on a CPU (with the intra-op threads in use) and 8192 on a GPU, so that a dtype
/// with only a slow kernel here still measures in about `seconds`. `method` receives a
/// description for the report (with the size used).
double measure_peak_tflops(c10::Device device, amp::AmpMode mode, double seconds,
                           std::string* method);

/// benchmark.json: every figure above with its unit in the key.
std::string benchmark_json(const BenchmarkResult& result);
/// A short human-readable summary for the console.
std::string benchmark_table(const BenchmarkResult& result);

}  // namespace nmt::train
