#include "model/linear.h"

#include <cmath>

#include <ATen/ops/empty.h>
#include <torch/nn/init.h>

#include "model/initialization.h"

namespace nmt::model {

LinearImpl::LinearImpl(int64_t in_features, int64_t out_features, bool bias) {
  weight = register_parameter("weight", at::empty({out_features, in_features}));
  // An undefined "bias" as torch::nn::Linear registers it: named_parameters() leaves it out.
  this->bias = bias ? register_parameter("bias", at::empty({out_features}))
                    : register_parameter("bias", at::Tensor(), /*requires_grad=*/false);
  if (!initializing()) return;
  // torch::nn::LinearImpl::reset_parameters, draw for draw.
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (this->bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    torch::nn::init::uniform_(this->bias, -bound, bound);
  }
}

}  // namespace nmt::model
