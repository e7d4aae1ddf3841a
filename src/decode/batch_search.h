#pragma once
// The batch driver of translation: encoded sources in length order, cut into batches of at
// most max_tokens padded tokens (sentences x longest), each searched on the device (search.h)
// under the autocast precision, the hypotheses returned in input order. Length-sorted batches
// waste little padding. Internal to decode/ (the Translator's, as forced_scores.h is for
// scoring).

#include <cstdint>
#include <functional>
#include <vector>

#include <c10/core/Device.h>

#include "amp/amp_options.h"
#include "decode/ensemble.h"
#include "decode/search.h"
#include "decode/search_options.h"

namespace nmt::decode {

/// How sources are batched and searched.
struct BatchSearchOptions {
  int64_t max_tokens = 4096;              ///< padded source tokens per batch
  int64_t pad = 0;                        ///< the source padding id
  at::Device device{at::kCPU};            ///< where the models are
  amp::AmpMode amp = amp::AmpMode::kOff;  ///< autocast precision of the forward passes
  SearchOptions search;                   ///< beam, lengths, n-best, sampling
};

/// The hypotheses of sources[i] (encoder ids, EOS included; empty for a blank line, which
/// gets none), best first, as search() gives them; source i draws its samples as sentence
/// first_line + i. Calls on_batch (when set) after each batch with the count of sources done
/// so far, blank ones included.
std::vector<std::vector<Hypothesis>> search_batches(
    const Ensemble& models, const SearchIds& ids, const std::vector<std::vector<int64_t>>& sources,
    int64_t first_line, const BatchSearchOptions& options,
    const std::function<void(int64_t)>& on_batch);

}  // namespace nmt::decode
