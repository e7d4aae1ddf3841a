#include "catch_torch.h"  // first: see the header

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include "model/initialization.h"
#include "model/linear.h"

namespace {

std::vector<std::string> parameter_names(const torch::nn::Module& module) {
  std::vector<std::string> names;
  for (const auto& item : module.named_parameters()) names.push_back(item.key());
  return names;
}

}  // namespace

TEST_CASE("linear: the parameters and initial values of torch::nn::Linear, draw for draw",
          "[model][linear]") {
  for (const bool bias : {true, false}) {
    CAPTURE(bias);
    torch::manual_seed(11);
    const torch::nn::Linear theirs(torch::nn::LinearOptions(5, 7).bias(bias));
    const at::Tensor next_theirs = at::rand({3});
    torch::manual_seed(11);
    const nmt::model::Linear ours(5, 7, bias);
    const at::Tensor next_ours = at::rand({3});
    CHECK(parameter_names(*ours) == parameter_names(*theirs));
    CHECK(at::equal(ours->weight, theirs->weight));
    CHECK(ours->bias.defined() == bias);
    if (bias) CHECK(at::equal(ours->bias, theirs->bias));
    CHECK(ours->weight.requires_grad());
    // The generator is left where torch::nn::Linear leaves it: the draws after it are the same.
    CHECK(at::equal(next_ours, next_theirs));
  }
}

TEST_CASE("linear: inside SkipInitialization the parameters are allocated, nothing is drawn",
          "[model][linear]") {
  torch::manual_seed(3);
  const at::Tensor expected = at::rand({4});
  torch::manual_seed(3);
  nmt::model::Linear linear(nullptr);
  {
    const nmt::model::SkipInitialization skip;
    linear = nmt::model::Linear(6, 2);
  }
  CHECK(at::equal(at::rand({4}), expected));
  CHECK(linear->weight.sizes() == at::IntArrayRef({2, 6}));
  CHECK(linear->bias.sizes() == at::IntArrayRef({2}));
  CHECK(parameter_names(*linear) == std::vector<std::string>{"weight", "bias"});
}
