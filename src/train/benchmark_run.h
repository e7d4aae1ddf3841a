#pragma once
// Benchmark mode (nmt-train --benchmark N): timed training updates through the same Updater
// as training, from a fresh start (no checkpoints, no validation). The headline pass waits for
// the device only at its ends, as training does; the step split comes from it on a CPU and
// from a second pass with a device sync at every phase boundary on a GPU
// (BenchmarkOptions::phase_steps). Every rank takes part; the result sums tokens and FLOPs over ranks. With
// --dump-batches, rank 0 also writes its batches, the initial parameters and the effective
// config there, for scripts/bench/reference_train.py (benchmark_dump.h). The report itself is
// benchmark.h.

#include "train/benchmark.h"

namespace nmt::data {
struct PreparedData;
}

namespace nmt::train {

struct RunSetup;

/// Runs options.warmup untimed then options.steps timed updates of `setup` on `data` (or on
/// synthetic batches). Throws ConfigError for fewer than 1 timed step or a negative warm-up.
BenchmarkResult run_benchmark(const RunSetup& setup, const data::PreparedData& data,
                              const BenchmarkOptions& options);

}  // namespace nmt::train
