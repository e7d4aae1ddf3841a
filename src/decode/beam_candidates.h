#pragma once
// The candidates a beam search step chooses from: for each live sentence, the best
// (row score + next-token log-probability) over its beam rows and the whole vocabulary.
// Internal to decode/ (beam_search.cpp; greedy search takes best_tokens, search.cpp).
//
// On the CPU this is one pass over the log-probabilities per sentence, keeping the few best in
// a sorted list; the comparisons against the list's worst are vectorized (the sum of the score
// and a log-probability is formed only for the few that can enter). It replaces a sum written
// out for every token and a top-k over it, which were a tenth of beam-4 decoding time on one
// CPU thread. Other devices use that sum and at::topk.

#include <cstdint>
#include <tuple>

#include <ATen/core/Tensor.h>

namespace nmt::decode {

/// The `width` best candidates of each of n sentences, best first, on the CPU.
struct Candidates {
  at::Tensor values;  ///< [n, width] float32: row score + the token's log-probability
  at::Tensor index;   ///< [n, width] int64: beam * vocab + token (beam within the sentence)
  int64_t width = 0;  ///< candidates per sentence: min(2 x beam, beam x vocab)
  int64_t vocab = 0;  ///< vocabulary size
};

/// Candidates of n sentences from their rows' scores [n * beam] (float32) and next-token
/// log-probabilities [n * beam, V] (float32); row i * beam + k is beam k of sentence i. Equal
/// values are ordered by index, lower first (every value is a candidate, -inf included; on the
/// CPU a NaN counts as -inf).
Candidates best_candidates(const at::Tensor& scores, const at::Tensor& lprobs, int64_t n,
                           int64_t beam);

/// (log-probability, token) [R] of each row's best next token in log-probabilities [R, V]
/// (float32), greedy search's choice: as lprobs.max(1), equal values to the lower token. On the
/// CPU the same vectorized pass as best_candidates (there a NaN counts as -inf); LibTorch's max
/// with indices runs a scalar loop over the vocabulary, 3.8% of greedy decoding samples
/// (docs/performance-log.md). Other devices use max(1).
std::tuple<at::Tensor, at::Tensor> best_tokens(const at::Tensor& lprobs);

}  // namespace nmt::decode
