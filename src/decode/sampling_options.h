#pragma once
// Options of random sampling (nmt-translate --sampling), the alternative to beam search that
// back-translation uses (Edunov et al. 2018). No torch types, so the command line (config/)
// can fill them without compiling against LibTorch.

#include <cstdint>

namespace nmt::decode {

/// The range of SamplingOptions::temperature that validate() and --sampling accept. Outside
/// it a draw is no longer a draw from a tempered distribution in float32: below the minimum it
/// is greedy search (use topk:1), above the maximum it is uniform over the candidates.
constexpr double kMinSamplingTemperature = 1e-3;
constexpr double kMaxSamplingTemperature = 1e3;

/// Draw each output token at random from the model's distribution instead of searching.
/// Every field has a default; checked by validate(SearchOptions).
struct SamplingOptions {
  int64_t top_k = 0;         ///< > 0: draw only among the k most probable tokens (renormalized);
                             ///< 0: from the whole vocabulary
  double temperature = 1.0;  ///< divides the log-probabilities before the draw: < 1 sharper,
                             ///< > 1 flatter; in [kMinSamplingTemperature,
                             ///< kMaxSamplingTemperature]
  uint64_t seed = 0;         ///< the random numbers of sentence i depend only on
                             ///< (seed, i, step), whatever its batch (see sampling.h for what
                             ///< that makes reproducible)
};

}  // namespace nmt::decode
