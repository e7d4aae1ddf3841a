#include "train/ema.h"

#include <algorithm>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "util/error.h"
#include "util/shape.h"

namespace nmt::train {
namespace {

std::vector<at::Tensor> tensors_of(const NamedTensors& named) {
  std::vector<at::Tensor> out;
  out.reserve(named.size());
  for (const auto& [name, tensor] : named) out.push_back(tensor);
  return out;
}

}  // namespace

ParameterAverage::ParameterAverage(NamedTensors parameters, double decay)
    : parameters_(std::move(parameters)), decay_(decay) {
  NMT_CHECK(decay > 0 && decay < 1, ConfigError,
            "train.ema_decay: expected a number in (0, 1), found {}", decay);
  at::NoGradGuard no_grad;
  for (const auto& [name, p] : parameters_) {
    // The lerp kernel takes one dtype; the model keeps float32 parameters (autocast casts
    // per operation), so the average is exact float32 arithmetic on them.
    NMT_CHECK(p.scalar_type() == at::kFloat, Error,
              "train.ema_decay: parameter {} is {}, the moving average needs float32 parameters",
              name, std::string(c10::toString(p.scalar_type())));
    averages_.emplace_back(name, p.detach().clone());
  }
}

double ParameterAverage::decay_at(int64_t step) const {
  return std::min(decay_, double(1 + step) / double(10 + step));
}

void ParameterAverage::update(int64_t step) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> averages = tensors_of(averages_);
  at::_foreach_lerp_(averages, tensors_of(parameters_), 1.0 - decay_at(step));
}

void ParameterAverage::restart() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < averages_.size(); ++i) averages_[i].second.copy_(parameters_[i].second);
}

NamedTensors ParameterAverage::state() const {
  NamedTensors out;
  out.reserve(averages_.size());
  for (const auto& [name, average] : averages_)
    out.emplace_back(name, average.detach());
  return out;
}

bool ParameterAverage::load_state(const checkpoint::TensorFinder& find) {
  std::vector<const at::Tensor*> saved;
  std::string first_missing;
  for (const auto& [name, average] : averages_) {
    const std::string key = checkpoint::tensor_name(checkpoint::TensorGroup::kEma, name);
    const at::Tensor* t = find(name);
    if (t == nullptr) {
      if (first_missing.empty()) first_missing = key;
      continue;
    }
    NMT_CHECK(t->sizes() == average.sizes(), CheckpointError,
              "tensor {} has shape {} in the checkpoint, the model's is {}", key,
              shape_string(t->sizes()), shape_string(average.sizes()));
    saved.push_back(t);
  }
  if (saved.empty()) return false;
  NMT_CHECK(first_missing.empty(), CheckpointError,
            "tensor {} is missing, although the checkpoint holds other {}* tensors",
            first_missing, checkpoint::group_prefix(checkpoint::TensorGroup::kEma));
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < saved.size(); ++i) averages_[i].second.copy_(*saved[i]);
  return true;
}

ParameterAverage::Swap::Swap(ParameterAverage& average) : average_(average) {
  at::NoGradGuard no_grad;
  saved_.reserve(average_.parameters_.size());
  for (size_t i = 0; i < average_.parameters_.size(); ++i) {
    at::Tensor& p = average_.parameters_[i].second;
    saved_.push_back(p.detach().clone());
    p.detach().copy_(average_.averages_[i].second);
  }
}

ParameterAverage::Swap::~Swap() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < saved_.size(); ++i) average_.parameters_[i].second.detach().copy_(saved_[i]);
}

}  // namespace nmt::train
