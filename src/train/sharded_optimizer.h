#pragma once
// The optimizer state split over the ranks of a job (dist.sharding: optimizer, ZeRO stage 1 of
// Rajbhandari et al. 2020). Every rank still holds the weights and the summed gradients, but
// the optimizer state (Adam's two moments: 8 of the 16 bytes a parameter costs in fp32) only
// for its own share of the parameters. A parameter is owned whole by one rank, so an update is
// the same arithmetic on the same summed gradient as without sharding, hence bit for bit the
// same parameters; then each owner broadcasts what it stepped.
//
//   ShardedOptimizer optimizer(parameters, train_options, communicator);  // every rank
//   ... backward, gradients summed over the ranks, unscaled and clipped as usual ...
//   optimizer.step(lr, &found_inf);           // each steps its share, then all are in sync
//   NamedTensors saved = optimizer.collect_state(rank == 0);  // every rank, when saving
//
// Checkpoints hold the whole state under the usual names (collect_state gathers it on the
// writer, one parameter at a time so that no rank holds more than one parameter's state on
// top of its share), so a checkpoint resumes on any number of ranks, sharded or not, and a
// sharded run resumes from any checkpoint: load_state takes the rank's share of the names.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "train/optimizer.h"

namespace nmt::dist {
class Communicator;
}

namespace nmt::train {

/// Which rank keeps the state of each parameter, given their element counts: the largest
/// first, each to the rank with the fewest elements so far (the lowest rank on a tie). The
/// same on every rank; a rank may own nothing when there are fewer parameters than ranks.
std::vector<int> shard_owners(const std::vector<int64_t>& numels, int world_size);

/// A ParameterOptimizer (the one train.optimizer names) over this rank's share of the
/// parameters, that keeps every rank's parameters equal after each step.
class ShardedOptimizer final : public ParameterOptimizer {
 public:
  /// Every rank of `communicator` builds one over the same parameters, in the same order.
  /// Throws like ParameterOptimizer.
  ShardedOptimizer(NamedTensors parameters, const TrainOptions& options,
                   std::shared_ptr<dist::Communicator> communicator);
  ~ShardedOptimizer() override;

  /// Steps this rank's share (found_inf: every rank sees the same summed gradients, so all
  /// skip together), then every owner broadcasts its share's parameters. Every rank calls it.
  void step(double lr, const at::Tensor* found_inf = nullptr) override;
  /// This rank's share of the state only (CPU copies); collect_state gives the whole.
  NamedTensors state() const override;
  /// The state of parameter i when this rank owns it, else nothing.
  NamedTensors parameter_state(size_t i) const override;
  NamedTensors new_parameter_state(const std::string& name, const at::Tensor& param) const override;
  /// The state of this rank's share, from a checkpoint that holds the whole state (of any
  /// number of ranks, sharded or not). Throws like the inner optimizer's load_state.
  void load_state(const checkpoint::TensorFinder& find) override;
  /// Every rank calls it: each parameter's state is broadcast by its owner; the writer keeps
  /// CPU copies of all of it (state()'s names and order, as an unsharded optimizer's).
  NamedTensors collect_state(bool writer) const override;

  /// The owning rank of each parameter, in parameter order.
  const std::vector<int>& owners() const { return owners_; }
  /// Elements of the parameters this rank owns.
  int64_t owned_elements() const;

 private:
  std::shared_ptr<dist::Communicator> comm_;
  int rank_;
  Optimizer kind_;                             ///< train.optimizer
  std::vector<int> owners_;                    ///< per parameter
  std::vector<size_t> local_index_;            ///< per parameter: its index in inner_ if owned
  std::unique_ptr<ParameterOptimizer> inner_;  ///< null when this rank owns nothing
};

}  // namespace nmt::train
