#include "train/loss.h"

#include <c10/util/Exception.h>

namespace nmt::train {

LossSums label_smoothed_cross_entropy(const at::Tensor& logits, const at::Tensor& target,
                                      double epsilon, int64_t pad_id) {
  TORCH_CHECK(
      logits.dim() == target.dim() + 1 && logits.sizes().slice(0, target.dim()) == target.sizes(),
      "loss: expected logits [..., V] and target [...], found ", logits.sizes(), " and ",
      target.sizes());
  TORCH_CHECK(epsilon >= 0.0 && epsilon < 1.0, "loss: expected epsilon in [0, 1), found ", epsilon);
  const int64_t vocab = logits.size(-1);
  // The dtype argument computes in float32 without first materializing a float32 copy of
  // half-precision logits (CUDA), which at 32k vocabularies is the largest tensor of a step.
  const at::Tensor lprobs = at::log_softmax(logits, -1, at::kFloat);
  const at::Tensor keep = target.ne(pad_id);
  // Pad targets may be any id (even out of range for gather): point them at row 0, then mask.
  const at::Tensor safe_target = at::where(keep, target, at::zeros_like(target));
  const at::Tensor nll = -lprobs.gather(-1, safe_target.unsqueeze(-1)).squeeze(-1);
  const at::Tensor nll_sum = nll.masked_fill(keep.logical_not(), 0.0).sum();
  at::Tensor loss_sum = nll_sum;
  if (epsilon > 0.0) {
    const at::Tensor smooth = -lprobs.sum(-1);
    const at::Tensor smooth_sum = smooth.masked_fill(keep.logical_not(), 0.0).sum();
    loss_sum = (1.0 - epsilon) * nll_sum + (epsilon / static_cast<double>(vocab)) * smooth_sum;
  }
  return {loss_sum, nll_sum.detach(), keep.sum()};
}

}  // namespace nmt::train
