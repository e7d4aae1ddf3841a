#pragma once
// Options of greedy and beam search. No torch types, so the command line (config/) can fill
// them without compiling against LibTorch.

#include <cstdint>
#include <optional>

#include "decode/sampling_options.h"

namespace nmt::decode {

/// How to search for translations; every field has a default. Checked by validate().
struct SearchOptions {
  int64_t beam = 5;             ///< hypotheses kept per sentence; 1 is greedy search
  double length_penalty = 1.0;  ///< alpha of Wu et al. 2016: lp = ((5 + |Y|) / 6)^alpha; 0 = none
  double max_len_a = 1.2;       ///< longest output = max_len_a * source tokens + max_len_b
  int64_t max_len_b = 10;       ///< see max_len_a (tokens)
  int64_t nbest = 1;            ///< hypotheses returned per sentence; at most beam
  bool cached = true;           ///< false: re-run the decoder over the whole prefix each step
                                ///< (slow; for speed comparisons and tests)
  std::optional<SamplingOptions> sampling;  ///< set: draw one output per sentence at random
                                            ///< (beam and nbest must be 1); unset: search
  /// false: the caller does not read the hypotheses' scores, so greedy search of one model
  /// picks each step's best token from the logits, without a log-softmax over the
  /// vocabulary, and leaves score and normalized_score NaN. Beam search, sampling and
  /// ensembles need the log-probabilities and ignore it.
  bool scores = true;
};

/// Throws nmt::ConfigError naming the option when a value is out of range (beam < 1,
/// nbest < 1 or > beam, non-finite length_penalty, negative max_len_a or max_len_b; sampling
/// with beam or nbest > 1, top_k < 0, a temperature that is not finite and > 0).
void validate(const SearchOptions& options);

}  // namespace nmt::decode
