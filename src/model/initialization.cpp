#include "model/initialization.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>

namespace nmt::model {
namespace {

thread_local bool skipping = false;

}  // namespace

SkipInitialization::SkipInitialization() : was_skipping_(skipping) { skipping = true; }

SkipInitialization::~SkipInitialization() { skipping = was_skipping_; }

bool initializing() { return !skipping; }

void allocate_parameters_on(torch::nn::Module& module, const c10::Device& device) {
  at::NoGradGuard no_grad;
  // parameters() lists a tied parameter once; set_data swaps the memory under the tensor, so
  // every module holding it sees the new memory, and the old is freed.
  for (at::Tensor& parameter : module.parameters()) {
    parameter.set_data(at::empty(parameter.sizes(), parameter.options().device(device)));
  }
}

}  // namespace nmt::model
