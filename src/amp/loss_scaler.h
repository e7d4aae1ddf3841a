#pragma once
// Dynamic loss scaling for fp16 training (Micikevicius et al. 2018), after Flashlight's
// DynamicScaler and torch.amp.GradScaler. Every per-step method only queues device work:
// scale, growth tracker, the overflow flag and the skip counters are device tensors, and the
// host reads them only in check() and stats(), which the trainer calls at log steps.
//
// Usage (one optimizer update of several micro-batches):
//
//   DynamicLossScaler scaler(options.amp, device, options.precision == AmpMode::kFp16);
//   for (int64_t update = 1; ...; ++update) {
//     for (const auto& batch : micro_batches) {
//       at::Tensor loss;
//       { AutocastScope autocast(options.precision, device.type()); loss = forward(batch); }
//       scaler.scale(loss).backward();           // loss * scale, so fp16 grads stay normal
//     }
//     // (sum gradients and the target-token count across ranks)
//     const std::vector<at::Tensor> grads = optimizer.grads();
//     scaler.unscale_(grads, global_tokens);     // grads /= scale * tokens; sets found_inf
//     clip_grad_norm_(grads, clip_norm);          // after unscaling: the norm is the true one
//     optimizer.step(learning_rate(train, update), &scaler.found_inf());  // no-op on overflow
//     scaler.update();                           // back off on overflow, grow when clean
//     optimizer.zero_grad();
//     if (update % log_every == 0) {
//       scaler.check(update);                    // throws when training has diverged
//       const ScalerStats s = scaler.stats();    // scale, skipped steps for the log line
//     }
//   }
//
// With bf16 or fp32 (enabled = false) the same loop works: scale() returns the loss, the
// scale stays 1, but unscale_ still divides by the token count and flags non-finite
// gradients, so a NaN step is skipped and counted there too.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "amp/amp_options.h"
#include "checkpoint/tensor_layout.h"

namespace nmt::amp {

/// Host copy of the scaler's counters (read with a device sync).
struct ScalerStats {
  double scale = 1.0;             ///< current loss scale (1 when scaling is disabled)
  int64_t skipped_total = 0;      ///< updates skipped for non-finite gradients, ever
  int64_t consecutive_skips = 0;  ///< updates skipped in a row up to now (0 after a good one)
};

/// Dynamic loss scaler whose state lives on the training device; see the usage above.
class DynamicLossScaler {
 public:
  /// `enabled` turns loss scaling on (fp16); off, scale() is the identity and the scale is 1,
  /// but unscale_/update still divide gradients and count non-finite steps.
  DynamicLossScaler(const AmpOptions& options, c10::Device device, bool enabled);

  /// True when loss scaling is on.
  bool enabled() const { return enabled_; }
  /// The loss times the current scale (the loss itself when disabled).
  at::Tensor scale(const at::Tensor& loss) const;
  /// In one fused pass over `grads` (all on the scaler's device): multiplies them by
  /// 1 / (scale * extra_divisor) and sets found_inf() to 1 if any element is inf or NaN,
  /// else 0. extra_divisor is a scalar device tensor (e.g. the update's global target-token
  /// count, any numeric dtype) or undefined for 1.
  void unscale_(const std::vector<at::Tensor>& grads, const at::Tensor& extra_divisor);
  /// float [1] device tensor: 1 when the last unscale_ saw a non-finite gradient, else 0.
  /// The optimizer takes it to skip the update without a sync.
  const at::Tensor& found_inf() const { return found_inf_; }
  /// After the optimizer step: backs the scale off on overflow, grows it after
  /// growth_interval clean updates (when enabled), and counts skipped updates.
  void update();
  /// Reads the counters (host sync; call at log steps). Throws nmt::Error when
  /// max_consecutive_skips updates in a row were skipped or the scale fell below min_scale.
  /// `step` is the current update, for the message.
  void check(int64_t step) const;
  /// Scale and skip counters on the host (host sync).
  ScalerStats stats() const;

  /// Checkpoint tensors (CPU copies) of the scaler group, checkpoint::scaler_field: scale,
  /// enabled, growth_tracker, skipped_total, consecutive_skips.
  checkpoint::NamedTensors state() const;
  /// Restores what state() saved; `find` looks up a name within the scaler group. Throws
  /// nmt::CheckpointError naming a missing or misshapen tensor. The saved scale and growth
  /// tracker are ignored when disabled (the scale stays 1) and when the saved state was
  /// disabled (the scale stays init_scale); the counters are always restored.
  void load_state(const checkpoint::TensorFinder& find);

 private:
  AmpOptions options_;
  c10::Device device_;
  bool enabled_;
  at::Tensor scale_;              ///< float [1]
  at::Tensor growth_tracker_;     ///< int32 [1]: clean updates since the last change
  at::Tensor found_inf_;          ///< float [1]
  at::Tensor skipped_total_;      ///< int64 [1]
  at::Tensor consecutive_skips_;  ///< int64 [1]
  at::Tensor one_;                ///< float [1] holding 1, the divisor when none is given
};

}  // namespace nmt::amp
