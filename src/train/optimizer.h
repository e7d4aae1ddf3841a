#pragma once
// The optimizers of train.optimizer on LibTorch's fused multi-tensor kernels (one kernel per
// dtype for all parameters, like torch.optim.Adam(fused=True)), with a device-side skip flag so
// that an overflowing step needs no host sync: Adam and AdamW (AdamOptimizer), plain SGD
// (SgdOptimizer), behind one interface (ParameterOptimizer) that the Updater holds.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "checkpoint/tensor_layout.h"
#include "train/train_options.h"

namespace nmt::train {

using checkpoint::NamedTensors;

/// Updates a fixed list of parameters from their gradients. Parameters without a gradient at
/// a step are left alone (their step count included). Checkpoint state is named within the
/// optimizer group of checkpoint/tensor_layout.h ("<slot>.<parameter>").
class ParameterOptimizer {
 public:
  virtual ~ParameterOptimizer() = default;
  ParameterOptimizer(const ParameterOptimizer&) = delete;
  ParameterOptimizer& operator=(const ParameterOptimizer&) = delete;

  /// One update of every parameter that has a gradient. With found_inf (a float [1] tensor on
  /// the parameters' device, e.g. DynamicLossScaler::found_inf()) equal to 1, nothing changes:
  /// neither parameters nor state. Queues device work only; no host sync.
  virtual void step(double lr, const at::Tensor* found_inf = nullptr) = 0;
  /// Resets every gradient to undefined (set_to_none, PyTorch's default): no memset, and the
  /// first backward of the next update writes the gradient instead of adding to zeros.
  /// Later micro-batches accumulate into it as usual.
  void zero_grad();
  /// The defined gradients, in parameter order: what unscale_ and clip_grad_norm_ take.
  std::vector<at::Tensor> grads() const;
  /// The parameters, in the order given.
  const NamedTensors& parameters() const { return parameters_; }
  /// The parameters' device.
  c10::Device device() const { return device_; }

  /// Checkpoint tensors (CPU copies), named within the optimizer group: parameter_state of
  /// every parameter, in parameter order.
  virtual NamedTensors state() const;
  /// The state tensors kept for parameter i (live, not copies), named as state() names them.
  virtual NamedTensors parameter_state(size_t i) const = 0;
  /// New zero tensors shaped as the state kept for `param` named `name` (the same names,
  /// shapes, dtypes and device as parameter_state would give): where a rank receives the
  /// state that another rank keeps (sharded_optimizer.h).
  virtual NamedTensors new_parameter_state(const std::string& name,
                                           const at::Tensor& param) const = 0;
  /// What a checkpoint saves, collected by every rank of a job together: the whole state on
  /// the rank that writes (`writer`), nothing elsewhere. An optimizer that keeps all of its
  /// state (this one) needs no collective: state() on the writer.
  virtual NamedTensors collect_state(bool writer) const {
    return writer ? state() : NamedTensors{};
  }
  /// Restores what state() saved; `find` looks up a name within the optimizer group. Throws
  /// nmt::CheckpointError naming a missing tensor or one whose shape differs (expected versus
  /// found). Nothing is changed unless every tensor is present and matches.
  virtual void load_state(const checkpoint::TensorFinder& find) = 0;

 protected:
  /// Throws nmt::Error for an empty list, duplicate names, undefined or non-floating
  /// parameters, or parameters on more than one device.
  explicit ParameterOptimizer(NamedTensors parameters);
  /// The scalar found_inf as the kernels take it (checked), or nullopt without one.
  std::optional<at::Tensor> skip_flag(const at::Tensor* found_inf) const;

  NamedTensors parameters_;
  c10::Device device_;
  std::vector<std::vector<size_t>> groups_;  ///< parameter indices by dtype (one kernel each)
};

/// Adam (Kingma & Ba 2015) or AdamW (Loshchilov & Hutter 2019), per TrainOptions::optimizer,
/// with adam_beta1/2, adam_eps and weight_decay (Adam: L2 added to the gradient; AdamW:
/// decoupled, p -= lr * weight_decay * p). Per parameter, at step t (1-based):
///   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
///   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
/// State (exp_avg m, exp_avg_sq v, float32 step t) is allocated as zeros at construction,
/// on the parameters' device, and saved as exp_avg.<p>, exp_avg_sq.<p>, step.<p>.
class AdamOptimizer final : public ParameterOptimizer {
 public:
  /// `options.optimizer` must be kAdam or kAdamW. Throws like ParameterOptimizer.
  AdamOptimizer(NamedTensors parameters, const TrainOptions& options);
  void step(double lr, const at::Tensor* found_inf = nullptr) override;
  NamedTensors parameter_state(size_t i) const override;
  NamedTensors new_parameter_state(const std::string& name, const at::Tensor& param) const override;
  void load_state(const checkpoint::TensorFinder& find) override;

 private:
  bool decoupled_;  ///< AdamW
  double beta1_, beta2_, eps_, weight_decay_;
  std::vector<at::Tensor> exp_avg_;     ///< per parameter, like it
  std::vector<at::Tensor> exp_avg_sq_;  ///< per parameter, like it
  std::vector<at::Tensor> steps_;       ///< per parameter, float32 0-dim on device_
};

/// Plain SGD (LibTorch's fused SGD, no momentum): p -= lr * (g + weight_decay * p). It keeps no
/// state, so it saves none and ignores what a checkpoint holds (an Adam run's moments, or the
/// zero moments that some SGD checkpoints hold).
class SgdOptimizer final : public ParameterOptimizer {
 public:
  /// Throws like ParameterOptimizer.
  SgdOptimizer(NamedTensors parameters, const TrainOptions& options);
  void step(double lr, const at::Tensor* found_inf = nullptr) override;
  NamedTensors parameter_state(size_t) const override { return {}; }
  NamedTensors new_parameter_state(const std::string&, const at::Tensor&) const override {
    return {};
  }
  void load_state(const checkpoint::TensorFinder&) override {}

 private:
  double weight_decay_;
};

/// New zero tensors shaped as the state that optimizer `kind` keeps for `param` named `name`
/// (Adam and AdamW: exp_avg and exp_avg_sq like it, a float32 step; SGD: none).
NamedTensors new_optimizer_state(Optimizer kind, const std::string& name, const at::Tensor& param);

/// The optimizer that options.optimizer names, over `parameters`.
std::unique_ptr<ParameterOptimizer> make_optimizer(NamedTensors parameters,
                                                   const TrainOptions& options);

}  // namespace nmt::train
