#pragma once
// amp.mode auto: the precision a run trains in, decided once at start from the hardware and,
// on a CPU that has bf16 instructions, from timing the model itself; with the reason, which
// the plan lines of the log and summary.json give.
//
// The rule (measurements in docs/performance.md, "Precision: amp.mode auto"):
//   GPU:  bf16 where every visible GPU has compute capability >= 8.0 (Ampere and newer: bf16
//         tensor cores, and no loss scaling needed); fp32 below (fp16 would need loss scaling
//         and its overflow risk, which a default should not take silently).
//   CPU without AVX512-BF16 or AMX-BF16: fp32 (bf16 would be emulated, and slower).
//   CPU with them: timed. Whether bf16 is faster depends on the CPU and the model, not on a
//         width that holds everywhere: on a 2-core AVX512-BF16 EPYC tiny (d_model 128) ran
//         bf16 0.111 s a step against fp32's 0.145 s, while on a 2-core AMX Xeon bf16 ran
//         tiny at 0.62x and the demo at 0.87x of fp32's speed, and base at 1.58x. So each rank
//         times forward, loss and backward of the model in both (train/amp_timing.h), and rank
//         0's times decide for every rank: bf16 when it is at least kCpuBf16MinSpeedup times
//         faster, fp32 otherwise.
// The decided mode is written into the config that checkpoints store, so a resumed run keeps
// it without timing again.

#include <cstdint>
#include <optional>
#include <string>

#include "amp/amp_options.h"
#include "util/cpu_features.h"

namespace nmt::amp {

/// How much faster than fp32 a timed bf16 step must be for auto to pick bf16 on a CPU: a
/// margin over timing noise, since bf16 also rounds more than fp32 does.
inline constexpr double kCpuBf16MinSpeedup = 1.05;

/// What auto decides from.
struct AmpHardware {
  bool cuda = false;            ///< the ranks train on GPUs
  int min_cuda_capability = 0;  ///< lowest compute capability of the GPUs, major * 10 + minor
  CpuFeatures cpu;              ///< the CPU's features (used without GPUs)
};

/// A decided precision and why, or a decision that awaits timing.
struct AmpChoice {
  AmpMode mode = AmpMode::kOff;  ///< the precision in effect (fp32 until a pending one is timed)
  bool automatic = false;        ///< decided by auto (false: the config named it)
  bool needs_timing = false;     ///< a CPU with bf16 instructions: decide_by_timing decides
  std::string reason;            ///< for the log and summary.json
};

/// The precision auto picks on `hardware` (the rule above); on a CPU with bf16 instructions a
/// choice with needs_timing set.
AmpChoice choose_amp_mode(const AmpHardware& hardware);

/// `configured` when it names a mode ("as configured"), else auto's choice.
AmpChoice resolve_amp_mode(std::optional<AmpMode> configured, const AmpHardware& hardware);

/// Settles a choice that awaits timing from the median seconds of a step (forward, loss and
/// backward) in fp32 and in bf16: bf16 when fp32_s / bf16_s >= kCpuBf16MinSpeedup.
AmpChoice decide_by_timing(const AmpChoice& pending, double fp32_s, double bf16_s);

}  // namespace nmt::amp
