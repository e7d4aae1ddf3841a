#include "train/grad_utils.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

namespace nmt::train {

at::Tensor total_grad_norm(const std::vector<at::Tensor>& grads) {
  if (grads.empty()) return at::zeros({}, at::kFloat);
  const c10::NoGradGuard no_grad;
  // Per-tensor norms accumulated in float32 (also for fp16/bf16 gradients), then the norm of
  // those norms: sqrt(sum_i |g_i|^2) = |g|.
  const std::vector<at::Tensor> norms = at::_foreach_norm(grads, 2, at::kFloat);
  return at::linalg_vector_norm(at::stack(norms), 2);
}

at::Tensor clip_grad_norm_(const std::vector<at::Tensor>& grads, double max_norm) {
  at::Tensor norm = total_grad_norm(grads);
  if (max_norm > 0 && !grads.empty()) {
    const c10::NoGradGuard no_grad;
    // A device scalar: the clamp happens on the device, so no sync.
    const at::Tensor coef = (max_norm / (norm + 1e-6)).clamp_max(1.0);
    at::_foreach_mul_(grads, coef);
  }
  return norm;
}

}  // namespace nmt::train
