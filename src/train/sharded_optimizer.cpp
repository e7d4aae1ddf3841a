#include "train/sharded_optimizer.h"

#include <algorithm>
#include <numeric>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "dist/process_group.h"
#include "util/error.h"

namespace nmt::train {

std::vector<int> shard_owners(const std::vector<int64_t>& numels, int world_size) {
  NMT_CHECK(world_size >= 1, nmt::Error, "shard_owners: expected world_size >= 1, found {}",
            world_size);
  std::vector<size_t> order(numels.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return numels[a] > numels[b]; });
  std::vector<int64_t> load(static_cast<size_t>(world_size), 0);
  std::vector<int> owners(numels.size(), 0);
  for (size_t i : order) {
    const auto lightest = std::min_element(load.begin(), load.end());
    owners[i] = static_cast<int>(lightest - load.begin());
    *lightest += numels[i];
  }
  return owners;
}

namespace {

std::vector<int64_t> element_counts(const NamedTensors& parameters) {
  std::vector<int64_t> out;
  out.reserve(parameters.size());
  for (const auto& entry : parameters) out.push_back(entry.second.numel());
  return out;
}

/// A CPU copy that never aliases t (Tensor::cpu() returns t itself for a CPU tensor).
at::Tensor cpu_copy(const at::Tensor& t) {
  return t.to(at::kCPU, t.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
}

}  // namespace

ShardedOptimizer::ShardedOptimizer(NamedTensors parameters, const TrainOptions& options,
                                   std::shared_ptr<dist::Communicator> communicator)
    : ParameterOptimizer(std::move(parameters)),
      comm_(std::move(communicator)),
      rank_(comm_ ? comm_->rank() : 0),
      kind_(options.optimizer) {
  NMT_CHECK(comm_ != nullptr, nmt::Error, "ShardedOptimizer: expected a communicator");
  owners_ = shard_owners(element_counts(parameters_), comm_->world_size());
  NamedTensors owned;
  local_index_.assign(parameters_.size(), 0);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (owners_[i] != rank_) continue;
    local_index_[i] = owned.size();
    owned.push_back(parameters_[i]);
  }
  if (!owned.empty()) inner_ = make_optimizer(std::move(owned), options);
}

ShardedOptimizer::~ShardedOptimizer() = default;

void ShardedOptimizer::step(double lr, const at::Tensor* found_inf) {
  if (inner_) inner_->step(lr, found_inf);
  // Each owner's parameters in one broadcast (coalesced per dtype), owners in rank order: the
  // same collectives in the same order on every rank.
  const c10::NoGradGuard no_grad;
  for (int owner = 0; owner < comm_->world_size(); ++owner) {
    std::vector<at::Tensor> share;
    for (size_t i = 0; i < parameters_.size(); ++i)
      if (owners_[i] == owner) share.push_back(parameters_[i].second);
    if (!share.empty()) comm_->broadcast(share, owner);
  }
}

NamedTensors ShardedOptimizer::state() const { return inner_ ? inner_->state() : NamedTensors{}; }

NamedTensors ShardedOptimizer::parameter_state(size_t i) const {
  if (owners_.at(i) != rank_) return {};
  return inner_->parameter_state(local_index_[i]);
}

NamedTensors ShardedOptimizer::new_parameter_state(const std::string& name,
                                                   const at::Tensor& param) const {
  return new_optimizer_state(kind_, name, param);
}

void ShardedOptimizer::load_state(const checkpoint::TensorFinder& find) {
  if (inner_) inner_->load_state(find);
}

NamedTensors ShardedOptimizer::collect_state(bool writer) const {
  NamedTensors out;
  const c10::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const auto& [name, param] = parameters_[i];
    NamedTensors state =
        owners_[i] == rank_ ? parameter_state(i) : new_parameter_state(name, param);
    if (state.empty()) continue;  // an optimizer without state (SGD): nothing to send
    std::vector<at::Tensor> tensors;
    for (const auto& entry : state) tensors.push_back(entry.second);
    comm_->broadcast(tensors, owners_[i]);
    if (!writer) continue;
    for (size_t k = 0; k < state.size(); ++k)
      out.emplace_back(state[k].first, cpu_copy(tensors[k]));
  }
  return out;
}

int64_t ShardedOptimizer::owned_elements() const {
  int64_t n = 0;
  for (size_t i = 0; i < parameters_.size(); ++i)
    if (owners_[i] == rank_) n += parameters_[i].second.numel();
  return n;
}

}  // namespace nmt::train
