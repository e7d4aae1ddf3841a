#pragma once
// amp.mode auto: the precision a run trains in, decided once at start from the hardware and the
// model, with the reason, which the plan lines of the log and summary.json give.
//
// The rule (measurements in docs/performance.md, "amp.mode auto"):
//   GPU:  bf16 where every visible GPU has compute capability >= 8.0 (Ampere and newer: bf16
//         tensor cores, and no loss scaling needed); fp32 below (fp16 would need loss scaling
//         and its overflow risk, which a default should not take silently).
//   CPU:  bf16 where the CPU has AVX512-BF16 or AMX-BF16 and d_model >= kCpuBf16MinWidth:
//         measured faster than fp32 on a 2-core AVX512-BF16 EPYC at d_model 128 (tiny: 0.111
//         against 0.145 s a step) and 512 (base: a 0.98 against 0.22 TFLOP/s matmul peak, 3,021
//         tokens/s); narrower models were not measured and stay fp32. Without those
//         instructions bf16 is emulated and slower: fp32.
// A rule rather than a timed probe at start: a probe of the real model costs seconds to
// minutes on a CPU at every start (more than a short run saves) and gives different answers
// on a loaded machine, so ranks could disagree; the rule is the same on every rank.

#include <cstdint>
#include <string>

#include "amp/amp_options.h"
#include "util/cpu_features.h"

namespace nmt::amp {

/// Narrowest model measured to train faster in bf16 than in fp32 on a CPU with AVX512-BF16.
inline constexpr int64_t kCpuBf16MinWidth = 128;

/// What auto decides from.
struct AmpHardware {
  bool cuda = false;            ///< the ranks train on GPUs
  int min_cuda_capability = 0;  ///< lowest compute capability of the GPUs, major * 10 + minor
  CpuFeatures cpu;              ///< the CPU's features (used without GPUs)
};

/// A decided precision and why.
struct AmpChoice {
  AmpMode mode = AmpMode::kOff;  ///< the precision in effect
  bool automatic = false;        ///< decided by auto (false: the config named it)
  std::string reason;            ///< for the log and summary.json
};

/// The precision auto picks for a model of width d_model on `hardware` (the rule above).
AmpChoice choose_amp_mode(const AmpHardware& hardware, int64_t d_model);

/// `configured` when it names a mode ("amp.mode bf16 as configured"), else auto's choice.
AmpChoice resolve_amp_mode(std::optional<AmpMode> configured, const AmpHardware& hardware,
                           int64_t d_model);

}  // namespace nmt::amp
