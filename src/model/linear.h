#pragma once
// A linear layer's parameters: weight [out, in] and bias [out], named as torch::nn::Linear names
// them (a checkpoint's names do not change). The owner computes the product (packed_linear.h,
// quantized_linear): this module holds the tensors and draws their initial values, which
// torch::nn::Linear draws in its constructor with no way to leave them out.

#include <cstdint>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace nmt::model {

class LinearImpl : public torch::nn::Module {
 public:
  /// The parameters initialized as torch::nn::Linear(in, out) initializes them (the same
  /// draws in the same order: a model starts from the values it started from with it), or
  /// left as allocated inside a SkipInitialization (initialization.h). Without `bias` the
  /// module has no bias parameter.
  LinearImpl(int64_t in_features, int64_t out_features, bool bias = true);

  at::Tensor weight;  ///< [out_features, in_features]
  at::Tensor bias;    ///< [out_features], or undefined
};
TORCH_MODULE(Linear);

}  // namespace nmt::model
