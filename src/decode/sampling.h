#pragma once
// Random sampling of output tokens (nmt-translate --sampling): each step draws the next token
// of a sentence from the model's distribution, optionally sharpened or flattened by a
// temperature and cut to the top k tokens, instead of taking the best (greedy) or keeping a
// beam. Back-translation with sampled sources beats beam search at scale (Edunov et al. 2018),
// since beam outputs are too regular to teach the forward model much.
//
// The draw of row r at a step is inverse-CDF sampling: p = softmax(lprobs / T) over the
// vocabulary in id order (with top_k: over the k most probable tokens, sorted descending,
// renormalized), and the first token whose cumulative p exceeds u x (total p), where
// u = sample_uniform(seed, sentence of row r, step). The random number is a function of
// (seed, sentence, step) alone, with no generator state, so a sentence draws the same numbers
// whatever else is in its batch, in any batch order, on any device. The tokens drawn are the
// same only as far as the probabilities are: the same batches on one machine give the same
// output, while another batching pads a sentence differently, its probabilities change by
// float rounding, and a draw that close to a boundary takes the neighbouring token
// (test_sampling checks exactly that); another device or precision likewise.
//
// search() runs the loop (greedy_search with SearchOptions::sampling set); this component is
// the draw.

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "decode/sampling_options.h"

namespace nmt::decode {

/// A number in [0, 1) with 24 random bits (exact in float32) for draw `step` of sentence
/// `sentence` under `seed`: SplitMix64 finalizers applied to the three in turn.
float sample_uniform(uint64_t seed, int64_t sentence, int64_t step);

/// Draws one token per row of lprobs [R, V] (float32 log-probabilities, -inf for banned
/// tokens; every row has at least one allowed token). sentences[r] is the sentence (input
/// line) that row r belongs to. Returns int64 token ids [R] on lprobs' device; a token of
/// probability 0 (banned, or outside the top k) is never drawn.
at::Tensor sample_tokens(const at::Tensor& lprobs, const SamplingOptions& options,
                         const std::vector<int64_t>& sentences, int64_t step);

/// The options as nmt-translate --sampling spells them, e.g. "topk:10,temperature:0.7 seed 1".
std::string describe(const SamplingOptions& options);

}  // namespace nmt::decode
