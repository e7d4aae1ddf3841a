#pragma once
// Mixed precision (YAML section `amp`).

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "util/error.h"

namespace nmt::amp {

/// Precision of autocast regions: off (fp32), fp16 (with dynamic loss scaling) or bf16.
enum class AmpMode { kOff, kFp16, kBf16 };

/// The names of the modes, the one table that the config schema (amp.mode), nmt-translate's
/// --amp and the logs all read.
inline constexpr std::array<std::pair<std::string_view, AmpMode>, 3> kAmpModeNames = {{
    {"off", AmpMode::kOff}, {"fp16", AmpMode::kFp16}, {"bf16", AmpMode::kBf16}}};

/// The word of amp.mode that leaves the mode to the hardware.
inline constexpr std::string_view kAutoModeName = "auto";

/// The config name of a mode ("off", "fp16", "bf16").
inline const char* mode_name(AmpMode mode) {
  for (const auto& [name, value] : kAmpModeNames)
    if (value == mode) return name.data();
  return "off";
}

/// The config name of a setting: a mode's, or "auto" for nullopt.
inline const char* mode_name(std::optional<AmpMode> mode) {
  return mode ? mode_name(*mode) : kAutoModeName.data();
}

struct AmpOptions {
  /// The precision; nullopt is `auto`, which job/ resolves once at start from the device
  /// (amp/amp_choice.h) before any component sees it: components take the settled mode. The
  /// default of new configs is auto (config/run_config.cpp); this one, for code that builds
  /// options directly, is fp32.
  std::optional<AmpMode> mode = AmpMode::kOff;
  double init_scale = 65536.0;          ///< initial fp16 loss scale
  int64_t growth_interval = 2000;       ///< overflow-free steps before the scale grows
  double growth_factor = 2.0;           ///< scale multiplier after growth_interval clean steps
  double backoff_factor = 0.5;          ///< scale multiplier after an overflow
  double min_scale = 1.0 / 1024;        ///< reaching it is an error, not silent divergence
  int64_t max_consecutive_skips = 20;   ///< that many overflowing steps in a row is an error
};

}  // namespace nmt::amp
