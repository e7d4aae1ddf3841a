#pragma once
// Greedy and beam search over a batch of source sentences with a Transformer, or an ensemble
// of them (ensemble.h: the weighted mean of their log-probabilities at every step), using each
// model's cached incremental decoder state (init_state / decode_step / reorder_state): each
// step feeds only the newest token. Rows of the batch finish independently and leave the
// batch when done.
//
// Scores are sums of token log-probabilities (computed in float32, also under autocast) over
// the output tokens and the final EOS; the normalized score divides by the length penalty of
// Wu et al. 2016, lp(Y) = ((5 + |Y|) / 6)^alpha, with |Y| counting the tokens and EOS.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "decode/ensemble.h"
#include "decode/search_options.h"

namespace nmt::decode {

/// One output hypothesis of a sentence.
struct Hypothesis {
  std::vector<int32_t> tokens;  ///< target ids, without BOS and EOS
  double score = 0;             ///< sum of log-probabilities (tokens and EOS)
  double normalized_score = 0;  ///< score / length penalty; hypotheses are ranked by it
};

/// Target special ids the search needs.
struct SearchIds {
  int64_t start = 2;  ///< fed first: the model's decoder start (model.decoder_start)
  int64_t bos = 2;    ///< never generated
  int64_t eos = 3;    ///< ends a hypothesis
  int64_t pad = 0;    ///< never generated
  /// Tokens every output starts with, one per step from the first, whatever the model
  /// prefers (scored 0, as transformers' forced_bos_token_id): the target language's code of
  /// an M2M100 or NLLB model, trained to come first. Empty: none.
  std::vector<int64_t> forced_prefix;
};

/// lp(Y) of Wu et al. 2016 for an output of `length` tokens (EOS included): ((5+len)/6)^alpha.
double length_penalty(int64_t length, double alpha);

/// Longest output (tokens, without EOS) for a source of src_len tokens:
/// floor(max_len_a * src_len) + max_len_b, capped at max_positions - 1 (the start token takes
/// position 0).
int64_t max_output_length(int64_t src_len, const SearchOptions& options, int64_t max_positions);

/// Translates src_ids [B, S] (int64, right-padded with the models' pad id, EOS-terminated, on
/// the models' device) with `models` (one model converts to an Ensemble of one). Returns per
/// sentence its options.nbest best hypotheses, best first. beam == 1 is greedy search, or with
/// options.sampling random sampling (sampling.h), whose draws for row i depend on (seed,
/// sentences[i], step); sentences empty: row i is sentence i. Runs without autograd; the caller
/// sets eval mode and, if wanted, an autocast scope. Throws nmt::ConfigError for invalid options.
std::vector<std::vector<Hypothesis>> search(const Ensemble& models, const at::Tensor& src_ids,
                                            const SearchIds& ids, const SearchOptions& options,
                                            const std::vector<int64_t>& sentences = {});

/// Greedy search (the beam == 1 path of search()): the best token at each step, or with
/// options.sampling a drawn one (its score is the model's log-probability of the token, not
/// the tempered one; an ensemble draws from the softmax of its mean log-probabilities).
std::vector<std::vector<Hypothesis>> greedy_search(const Ensemble& models,
                                                   const at::Tensor& src_ids, const SearchIds& ids,
                                                   const SearchOptions& options,
                                                   const std::vector<int64_t>& sentences = {});

/// Beam search with options.beam hypotheses per sentence. A sentence is finished when
/// `beam` hypotheses have ended with EOS (EOS is taken only among the `beam` best candidates
/// of a step, as in fairseq) or when it reaches its maximum length (EOS is then forced).
std::vector<std::vector<Hypothesis>> beam_search(const Ensemble& models, const at::Tensor& src_ids,
                                                 const SearchIds& ids,
                                                 const SearchOptions& options);

}  // namespace nmt::decode
