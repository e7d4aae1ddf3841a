#pragma once
// Label-smoothed cross-entropy (Szegedy et al. 2016) over non-padding target tokens.

#include <cstdint>

#include <ATen/ATen.h>

namespace nmt::train {

/// Sums over the non-padding target tokens of one batch; scalars on the logits' device,
/// never copied to the host here. The caller divides by the global token count.
struct LossSums {
  at::Tensor loss;    ///< float32 sum of the label-smoothed loss (what is minimized)
  at::Tensor nll;     ///< float32 sum of -log p(target) (for perplexity), detached
  at::Tensor tokens;  ///< int64 count of non-padding target tokens
};

/// For logits [..., V] and target [...] (same leading shape): per token, with
/// lp = log_softmax(logits) in float32,
///   loss = (1 - epsilon) * -lp[target] + epsilon / V * -sum_v lp[v],
/// i.e. cross-entropy against (1 - epsilon) * one_hot + epsilon / V uniform, summed over
/// tokens whose target is not pad_id. epsilon = 0 gives plain negative log-likelihood.
LossSums label_smoothed_cross_entropy(const at::Tensor& logits, const at::Tensor& target,
                                      double epsilon, int64_t pad_id);

}  // namespace nmt::train
