#pragma once
// Inverted dropout with a cheap mask on CPU.

#include <ATen/core/Tensor.h>

namespace nmt::model {

/// In training, zeroes each element with probability p and scales the others by 1 / (1 - p);
/// otherwise (or with p = 0) returns the input. On CPU the mask comes from a counter-based
/// hash of a seed drawn from LibTorch's default CPU generator (so checkpoints, which hold that
/// generator's state, still resume bit for bit), in one fused pass, and backward recomputes
/// it instead of storing it: LibTorch's bernoulli_ costs about 4 ns per element there, 9% of
/// a CPU training step of transformer-base. p is honoured to 1/65536. Elsewhere: at::dropout.
at::Tensor dropout(const at::Tensor& input, double p, bool training);

}  // namespace nmt::model
