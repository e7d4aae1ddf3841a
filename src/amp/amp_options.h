#pragma once
// Mixed precision (YAML section `amp`).

#include <cstdint>

namespace nmt::amp {

/// Precision of autocast regions: off (fp32), fp16 (with dynamic loss scaling) or bf16.
enum class AmpMode { kOff, kFp16, kBf16 };

struct AmpOptions {
  AmpMode mode = AmpMode::kOff;         ///< bf16 is recommended on Ampere and newer GPUs
  double init_scale = 65536.0;          ///< initial fp16 loss scale
  int64_t growth_interval = 2000;       ///< overflow-free steps before the scale grows
  double growth_factor = 2.0;           ///< scale multiplier after growth_interval clean steps
  double backoff_factor = 0.5;          ///< scale multiplier after an overflow
  double min_scale = 1.0 / 1024;        ///< reaching it is an error, not silent divergence
  int64_t max_consecutive_skips = 20;   ///< that many overflowing steps in a row is an error
};

}  // namespace nmt::amp
