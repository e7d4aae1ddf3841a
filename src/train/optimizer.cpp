#include "train/optimizer.h"

#include <map>
#include <set>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "util/error.h"
#include "util/shape.h"

namespace nmt::train {

namespace {

/// A CPU copy that never aliases t (Tensor::cpu() returns t itself for a CPU tensor).
at::Tensor cpu_copy(const at::Tensor& t) {
  return t.to(at::kCPU, t.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
}

}  // namespace

ParameterOptimizer::ParameterOptimizer(NamedTensors parameters)
    : parameters_(std::move(parameters)), device_(c10::kCPU) {
  NMT_CHECK(!parameters_.empty(), nmt::Error, "optimizer: expected parameters, found none");
  device_ = parameters_.front().second.defined() ? parameters_.front().second.device()
                                                 : c10::Device(c10::kCPU);
  std::set<std::string> names;
  std::map<c10::ScalarType, size_t> group_of_dtype;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const auto& [name, p] = parameters_[i];
    NMT_CHECK(names.insert(name).second, nmt::Error, "optimizer: parameter {} appears twice", name);
    NMT_CHECK(p.defined() && p.is_floating_point(), nmt::Error,
              "optimizer: parameter {}: expected a defined floating-point tensor", name);
    NMT_CHECK(p.device() == device_, nmt::Error,
              "optimizer: expected all parameters on {}, found {} on {}", device_.str(), name,
              p.device().str());
    auto [it, added] = group_of_dtype.emplace(p.scalar_type(), groups_.size());
    if (added) groups_.emplace_back();
    groups_[it->second].push_back(i);
  }
}

std::optional<at::Tensor> ParameterOptimizer::skip_flag(const at::Tensor* found_inf) const {
  if (found_inf == nullptr) return std::nullopt;
  NMT_CHECK(found_inf->device() == device_ && found_inf->numel() == 1, nmt::Error,
            "optimizer: expected found_inf as one element on {}, found {} elements on {}",
            device_.str(), found_inf->numel(), found_inf->device().str());
  return found_inf->view(c10::IntArrayRef{});
}

void ParameterOptimizer::zero_grad() {
  for (auto& [name, p] : parameters_) {
    if (p.grad().defined()) p.mutable_grad().reset();
  }
}

NamedTensors ParameterOptimizer::state() const {
  NamedTensors out;
  for (size_t i = 0; i < parameters_.size(); ++i)
    for (auto& [name, tensor] : parameter_state(i)) out.emplace_back(name, cpu_copy(tensor));
  return out;
}

std::vector<at::Tensor> ParameterOptimizer::grads() const {
  std::vector<at::Tensor> out;
  out.reserve(parameters_.size());
  for (const auto& [name, p] : parameters_) {
    if (p.grad().defined()) out.push_back(p.grad());
  }
  return out;
}

AdamOptimizer::AdamOptimizer(NamedTensors parameters, const TrainOptions& options)
    : ParameterOptimizer(std::move(parameters)),
      decoupled_(options.optimizer == Optimizer::kAdamW),
      beta1_(options.adam_beta1),
      beta2_(options.adam_beta2),
      eps_(options.adam_eps),
      weight_decay_(options.weight_decay) {
  NMT_CHECK(options.optimizer != Optimizer::kSgd, nmt::Error,
            "AdamOptimizer: train.optimizer is sgd (make_optimizer builds an SgdOptimizer)");
  const c10::NoGradGuard no_grad;
  for (const auto& [name, p] : parameters_) {
    exp_avg_.push_back(at::zeros_like(p, at::MemoryFormat::Preserve));
    exp_avg_sq_.push_back(at::zeros_like(p, at::MemoryFormat::Preserve));
    // The fused kernels take the step count as a float32 device scalar (as torch.optim does).
    steps_.push_back(at::zeros({}, p.options().dtype(at::kFloat)));
  }
}

void AdamOptimizer::step(double lr, const at::Tensor* found_inf) {
  const std::optional<at::Tensor> skip = skip_flag(found_inf);
  const c10::NoGradGuard no_grad;
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
  for (const auto& group : groups_) {
    params.clear(), grads.clear(), exp_avgs.clear(), exp_avg_sqs.clear(), steps.clear();
    for (size_t i : group) {
      const at::Tensor& grad = parameters_[i].second.grad();
      if (!grad.defined()) continue;
      params.push_back(parameters_[i].second);
      grads.push_back(grad);
      exp_avgs.push_back(exp_avg_[i]);
      exp_avg_sqs.push_back(exp_avg_sq_[i]);
      steps.push_back(steps_[i]);
    }
    if (params.empty()) continue;
    // As torch/optim/adam.py _fused_adam: count the step before the kernel (it reads t for
    // the bias corrections) and take it back when the kernel skipped the update, so that a
    // skipped step does not advance bias correction either.
    at::_foreach_add_(steps, 1);
    if (decoupled_) {
      at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, lr,
                        beta1_, beta2_, weight_decay_, eps_, /*amsgrad=*/false,
                        /*maximize=*/false, /*grad_scale=*/std::nullopt, skip);
    } else {
      at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, lr,
                       beta1_, beta2_, weight_decay_, eps_, /*amsgrad=*/false,
                       /*maximize=*/false, /*grad_scale=*/std::nullopt, skip);
    }
    if (skip) at::_foreach_add_(steps, *skip, /*alpha=*/-1);
  }
}

NamedTensors AdamOptimizer::parameter_state(size_t i) const {
  namespace slot = checkpoint::optimizer_slot;
  const std::string& name = parameters_.at(i).first;
  return {{slot::name(slot::kExpAvg, name), exp_avg_[i]},
          {slot::name(slot::kExpAvgSq, name), exp_avg_sq_[i]},
          {slot::name(slot::kStep, name), steps_[i]}};
}

NamedTensors AdamOptimizer::new_parameter_state(const std::string& name,
                                                const at::Tensor& param) const {
  return new_optimizer_state(Optimizer::kAdam, name, param);
}

void AdamOptimizer::load_state(const checkpoint::TensorFinder& find) {
  namespace slot = checkpoint::optimizer_slot;
  // Look everything up and check it first, so that a bad checkpoint changes nothing.
  std::vector<std::pair<const at::Tensor*, at::Tensor*>> copies;
  copies.reserve(3 * parameters_.size());
  const auto plan = [&](const std::string& name, at::Tensor& dest) {
    const at::Tensor* saved = find(name);
    const std::string full = checkpoint::tensor_name(checkpoint::TensorGroup::kOptimizer, name);
    NMT_CHECK(saved != nullptr && saved->defined(), nmt::CheckpointError,
              "optimizer state: tensor {} is missing from the checkpoint", full);
    NMT_CHECK(saved->sizes() == dest.sizes(), nmt::CheckpointError,
              "optimizer state: {}: expected shape {}, found {}", full, shape_string(dest.sizes()),
              shape_string(saved->sizes()));
    copies.emplace_back(saved, &dest);
  };
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const std::string& name = parameters_[i].first;
    plan(slot::name(slot::kExpAvg, name), exp_avg_[i]);
    plan(slot::name(slot::kExpAvgSq, name), exp_avg_sq_[i]);
    plan(slot::name(slot::kStep, name), steps_[i]);
  }
  const c10::NoGradGuard no_grad;
  for (auto& [saved, dest] : copies) dest->copy_(*saved);
}

SgdOptimizer::SgdOptimizer(NamedTensors parameters, const TrainOptions& options)
    : ParameterOptimizer(std::move(parameters)), weight_decay_(options.weight_decay) {}

void SgdOptimizer::step(double lr, const at::Tensor* found_inf) {
  const std::optional<at::Tensor> skip = skip_flag(found_inf);
  const c10::NoGradGuard no_grad;
  std::vector<at::Tensor> params, grads;
  for (const auto& group : groups_) {
    params.clear(), grads.clear();
    for (size_t i : group) {
      const at::Tensor& grad = parameters_[i].second.grad();
      if (!grad.defined()) continue;
      params.push_back(parameters_[i].second);
      grads.push_back(grad);
    }
    if (params.empty()) continue;
    at::_fused_sgd_(params, grads, /*momentum_buffer_list=*/{}, weight_decay_, /*momentum=*/0.0,
                    lr, /*dampening=*/0.0, /*nesterov=*/false, /*maximize=*/false,
                    /*is_first_step=*/false, /*grad_scale=*/std::nullopt, skip);
  }
}

NamedTensors new_optimizer_state(Optimizer kind, const std::string& name, const at::Tensor& param) {
  namespace slot = checkpoint::optimizer_slot;
  if (kind == Optimizer::kSgd) return {};
  const c10::NoGradGuard no_grad;
  return {{slot::name(slot::kExpAvg, name), at::zeros_like(param, at::MemoryFormat::Preserve)},
          {slot::name(slot::kExpAvgSq, name), at::zeros_like(param, at::MemoryFormat::Preserve)},
          {slot::name(slot::kStep, name), at::zeros({}, param.options().dtype(at::kFloat))}};
}

std::unique_ptr<ParameterOptimizer> make_optimizer(NamedTensors parameters,
                                                   const TrainOptions& options) {
  if (options.optimizer == Optimizer::kSgd)
    return std::make_unique<SgdOptimizer>(std::move(parameters), options);
  return std::make_unique<AdamOptimizer>(std::move(parameters), options);
}

}  // namespace nmt::train
