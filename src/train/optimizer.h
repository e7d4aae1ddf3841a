#pragma once
// Adam and AdamW on LibTorch's fused multi-tensor kernels (one kernel per dtype for all
// parameters, like torch.optim.Adam(fused=True)), with a device-side skip flag so that an
// overflowing step needs no host sync.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "train/train_options.h"

namespace nmt::train {

/// Named tensors, in a fixed order: parameters (as from Module::named_parameters()) or
/// checkpoint state.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// Adam (Kingma & Ba 2015) or AdamW (Loshchilov & Hutter 2019), per TrainOptions::optimizer,
/// with adam_beta1/2, adam_eps and weight_decay (Adam: L2 added to the gradient; AdamW:
/// decoupled, p -= lr * weight_decay * p). Per parameter, at step t (1-based):
///   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
///   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
/// State (exp_avg m, exp_avg_sq v, float32 step t) is allocated as zeros at construction,
/// on the parameters' device. With Optimizer::kSgd it is plain SGD instead (LibTorch's fused
/// SGD, no momentum), p -= lr * (g + weight_decay * p), the moments left at zero.
class AdamOptimizer {
 public:
  /// Throws nmt::Error for an empty list, duplicate names, undefined or non-floating
  /// parameters, or parameters on more than one device.
  AdamOptimizer(NamedTensors parameters, const TrainOptions& options);

  /// One update of every parameter that has a gradient (those without are left alone,
  /// their step count included). With found_inf (a float [1] tensor on the parameters'
  /// device, e.g. DynamicLossScaler::found_inf()) equal to 1, nothing changes: neither
  /// parameters, moments nor step counts. Queues device work only; no host sync.
  void step(double lr, const at::Tensor* found_inf = nullptr);
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

  /// Checkpoint tensors (CPU copies): optim.exp_avg.<name>, optim.exp_avg_sq.<name>,
  /// optim.step.<name> for every parameter.
  NamedTensors state() const;
  /// Restores what state() saved; `find` returns the tensor of a name or nullptr. Throws
  /// nmt::CheckpointError naming a missing tensor or one whose shape differs (expected
  /// versus found). Nothing is changed unless every tensor is present and matches.
  void load_state(const std::function<const at::Tensor*(std::string_view)>& find);

 private:
  NamedTensors parameters_;
  c10::Device device_;
  bool decoupled_;  ///< AdamW
  bool sgd_;        ///< plain SGD: p -= lr * (g + weight_decay * p); moments unused
  double beta1_, beta2_, eps_, weight_decay_;
  std::vector<at::Tensor> exp_avg_;          ///< per parameter, like it
  std::vector<at::Tensor> exp_avg_sq_;       ///< per parameter, like it
  std::vector<at::Tensor> steps_;            ///< per parameter, float32 0-dim on device_
  std::vector<std::vector<size_t>> groups_;  ///< parameter indices by dtype (one kernel each)
};

}  // namespace nmt::train
