#include "train/loss.h"

#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>

namespace nmt::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// The sums of the loss and what the gradient is made from, for logits [N, V], target [N].
struct LossParts {
  at::Tensor lprobs;       ///< float32 log_softmax of the logits, [N, V]
  at::Tensor keep;         ///< [N] bool: target is not padding
  at::Tensor safe_target;  ///< [N, 1] target, with padding pointed at id 0 (masked anyway)
  at::Tensor loss_sum;     ///< float32 scalar
  at::Tensor nll_sum;      ///< float32 scalar
};

LossParts loss_parts(const at::Tensor& logits, const at::Tensor& target, double epsilon,
                     int64_t pad_id) {
  LossParts p;
  // dtype float: half-precision logits are reduced in float32 without a float copy first
  // (on CUDA at 32k vocabularies the largest tensor of a step).
  p.lprobs = at::log_softmax(logits, -1, at::kFloat);
  p.keep = target.ne(pad_id);
  // Pad targets may be any id (even out of range for gather): point them at 0, then mask.
  p.safe_target = at::where(p.keep, target, at::zeros_like(target)).unsqueeze(-1);
  const at::Tensor drop = p.keep.logical_not();
  p.nll_sum = p.lprobs.gather(-1, p.safe_target).squeeze(-1).masked_fill(drop, 0.0).sum().neg();
  p.loss_sum = p.nll_sum;
  if (epsilon > 0.0) {
    const at::Tensor smooth_sum = p.lprobs.sum(-1).masked_fill(drop, 0.0).sum().neg();
    p.loss_sum = (1.0 - epsilon) * p.nll_sum +
                 (epsilon / static_cast<double>(logits.size(-1))) * smooth_sum;
  }
  return p;
}

/// The loss is the last operation of the graph, so its gradient with respect to the logits is
/// known when it is computed: per token, softmax - epsilon / V - (1 - epsilon) * one_hot
/// (zero for padding), times the incoming scalar gradient. This computes it in the forward
/// pass and only scales it in the backward one, instead of letting autograd go back through
/// log_softmax, gather, sum and masked_fill: on the [tokens, V] tensors, the largest of a
/// step, fewer memory passes and no gradient buffers for the intermediate results.
class SmoothedCrossEntropy : public torch::autograd::Function<SmoothedCrossEntropy> {
 public:
  /// logits [N, V], target [N] (int64). Returns {loss sum, nll sum} (float32 scalars).
  static variable_list forward(AutogradContext* ctx, const at::Tensor& logits,
                               const at::Tensor& target, double epsilon, int64_t pad_id) {
    LossParts p = loss_parts(logits, target, epsilon, pad_id);
    const double uniform = epsilon / static_cast<double>(logits.size(-1));
    // softmax - uniform - (1 - epsilon) at the target; exactly zero on padded rows.
    at::Tensor grad = p.lprobs.exp_().sub_(uniform);
    grad.scatter_add_(-1, p.safe_target,
                      at::full(p.safe_target.sizes(), -(1.0 - epsilon), grad.options()));
    grad.masked_fill_(p.keep.logical_not().unsqueeze(-1), 0.0);
    ctx->saved_data["grad"] = grad;
    ctx->saved_data["dtype"] = static_cast<int64_t>(logits.scalar_type());
    // Two outputs, only the first differentiable: they must be distinct tensors (epsilon 0).
    if (p.loss_sum.is_same(p.nll_sum)) p.loss_sum = p.nll_sum.clone();
    ctx->mark_non_differentiable({p.nll_sum});
    return {p.loss_sum, p.nll_sum};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor scale = grad_outputs[0].to(at::kFloat);  // d(objective)/d(loss sum)
    const at::Tensor grad = ctx->saved_data["grad"].toTensor();
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    // One pass, straight into the logits' dtype.
    at::Tensor result = at::empty_like(grad, grad.options().dtype(dtype));
    at::mul_out(result, grad, scale);
    return {result, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

LossSums label_smoothed_cross_entropy(const at::Tensor& logits, const at::Tensor& target,
                                      double epsilon, int64_t pad_id) {
  TORCH_CHECK(
      logits.dim() == target.dim() + 1 && logits.sizes().slice(0, target.dim()) == target.sizes(),
      "loss: expected logits [..., V] and target [...], found ", logits.sizes(), " and ",
      target.sizes());
  TORCH_CHECK(epsilon >= 0.0 && epsilon < 1.0, "loss: expected epsilon in [0, 1), found ", epsilon);
  const at::Tensor flat_logits = logits.reshape({-1, logits.size(-1)});
  const at::Tensor flat_target = target.reshape({-1});
  const at::Tensor tokens = target.ne(pad_id).sum();
  if (!(c10::GradMode::is_enabled() && logits.requires_grad())) {
    // No gradient wanted (validation): the sums alone.
    const LossParts p = loss_parts(flat_logits, flat_target, epsilon, pad_id);
    return {p.loss_sum, p.nll_sum, tokens};
  }
  const variable_list sums = SmoothedCrossEntropy::apply(flat_logits, flat_target, epsilon, pad_id);
  return {sums[0], sums[1].detach(), tokens};
}

}  // namespace nmt::train
