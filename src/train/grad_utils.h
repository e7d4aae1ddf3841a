#pragma once
// Gradient norm and norm clipping over many tensors in a few fused kernels, without a host
// sync (like torch.nn.utils.clip_grad_norm_ with foreach=True).

#include <vector>

#include <ATen/core/Tensor.h>

namespace nmt::train {

/// L2 norm of all gradients together, sqrt(sum of squares of every element), as a float32
/// 0-dim tensor on the gradients' device (all must share one); 0 for an empty list.
at::Tensor total_grad_norm(const std::vector<at::Tensor>& grads);

/// Returns total_grad_norm(grads) before clipping and, when max_norm > 0, scales all
/// gradients in place by min(1, max_norm / (norm + 1e-6)). A non-finite norm makes the
/// gradients non-finite too; the caller skips such a step anyway (found_inf).
at::Tensor clip_grad_norm_(const std::vector<at::Tensor>& grads, double max_norm);

}  // namespace nmt::train
