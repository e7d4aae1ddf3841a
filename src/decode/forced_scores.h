#pragma once
// Teacher-forced scores of given pairs (nmt-translate --score): per pair, the sum of the
// model's log-probabilities of the target tokens and EOS given the source, as training's
// loss sees them (decoder input: the decoder start, then the target; predicted: the target,
// then EOS). Pairs are batched by tokens in length order, as decoding batches its input, and
// the results go back to input order. The log-softmax is float32 and the sums double. An
// ensemble's score of a pair is the weighted mean of its models' scores (ensemble.h).
//
//   auto scores = forced_scores(*model, ids, sources, targets, options, {});

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/ATen.h>

#include "amp/amp_options.h"
#include "decode/ensemble.h"
#include "decode/translator.h"

namespace nmt::decode {

/// The ids that frame a target.
struct ForcedIds {
  int64_t decoder_start = 2;  ///< fed first (model.decoder_start)
  int64_t eos = 3;            ///< predicted last
  int64_t pad = 0;            ///< padding of both sides
};

/// How pairs are batched and run.
struct ForcedScoreOptions {
  int64_t max_tokens = 4096;              ///< padded tokens per batch (rows x longest side)
  at::Device device{at::kCPU};            ///< where the models are
  amp::AmpMode amp = amp::AmpMode::kOff;  ///< autocast precision of the forward passes
};

/// Scores pair i = (sources[i], targets[i]): sources are encoder ids (EOS included, never
/// empty), targets the ids to predict before EOS (may be empty). Calls on_batch (when set)
/// with the count of pairs done after each batch.
std::vector<PairScore> forced_scores(const Ensemble& models, const ForcedIds& ids,
                                     const std::vector<std::vector<int64_t>>& sources,
                                     const std::vector<std::vector<int64_t>>& targets,
                                     const ForcedScoreOptions& options,
                                     const std::function<void(int64_t)>& on_batch);

}  // namespace nmt::decode
