#pragma once
// Options of random sampling (nmt-translate --sampling), the alternative to beam search that
// back-translation uses (Edunov et al. 2018). No torch types, so the command line (config/)
// can fill them without compiling against LibTorch.

#include <cstdint>

namespace nmt::decode {

/// Draw each output token at random from the model's distribution instead of searching.
/// Every field has a default; checked by validate(SearchOptions).
struct SamplingOptions {
  int64_t top_k = 0;         ///< > 0: draw only among the k most probable tokens (renormalized);
                             ///< 0: from the whole vocabulary
  double temperature = 1.0;  ///< divides the log-probabilities before the draw: < 1 sharper,
                             ///< > 1 flatter; must be > 0 and finite
  uint64_t seed = 0;         ///< the draws of sentence i depend only on (seed, i, step), so
                             ///< the same seed and input give the same output in any batching
};

}  // namespace nmt::decode
