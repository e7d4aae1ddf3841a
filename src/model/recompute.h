#pragma once
// Activation checkpointing: a block's forward that keeps its inputs only and runs again in
// backward (the reentrant scheme of torch.utils.checkpoint, which LibTorch's C++ API lacks).

#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

namespace nmt::model {

/// A block's forward over its tensor inputs; it may read other tensors that take gradients
/// only if they are among the params passed beside it.
using RecomputeFn = std::function<at::Tensor(const std::vector<at::Tensor>& inputs)>;

/// Returns fn(inputs), computed without recording fn's graph: backward runs fn again with the
/// random generators and autocast state of this call and takes the gradients of inputs and
/// params from that second run, so they equal those of fn(inputs) called directly, for about
/// one more forward of fn. fn's random draws come from the default CPU generator and, for
/// inputs on another device, that device's default generator; they see one draw sequence in
/// both runs, and backward leaves the generators where it found them. params are the tensors
/// fn reads that take gradients (its module's parameters): their gradients arrive through this
/// call's node in the outer backward, so .grad and the hooks of their gradient accumulators
/// behave as without it. Call it only where autograd records (grad mode on).
at::Tensor recompute_in_backward(RecomputeFn fn, std::vector<at::Tensor> inputs,
                                 std::vector<at::Tensor> params);

}  // namespace nmt::model
