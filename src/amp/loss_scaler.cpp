#include "amp/loss_scaler.h"

#include <ATen/ATen.h>

#include "util/error.h"
#include "util/shape.h"
#include "util/log.h"

namespace nmt::amp {

namespace {

/// Copies the checkpoint tensor `name` into `dest` (on dest's device and dtype).
void restore(const checkpoint::TensorFinder& find, std::string_view name, at::Tensor& dest) {
  const at::Tensor* saved = find(name);
  const std::string full = checkpoint::tensor_name(checkpoint::TensorGroup::kScaler, name);
  NMT_CHECK(saved != nullptr && saved->defined(), nmt::CheckpointError,
            "loss scaler state: tensor {} is missing from the checkpoint", full);
  NMT_CHECK(saved->numel() == dest.numel(), nmt::CheckpointError,
            "loss scaler state: {} has shape {}, expected {}", full, shape_string(saved->sizes()),
            shape_string(dest.sizes()));
  dest.copy_(saved->reshape(dest.sizes()));
}

/// A CPU copy that never aliases t (Tensor::cpu() returns t itself for a CPU tensor).
at::Tensor cpu_copy(const at::Tensor& t) {
  return t.to(at::kCPU, t.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
}

}  // namespace

DynamicLossScaler::DynamicLossScaler(const AmpOptions& options, c10::Device device, bool enabled)
    : options_(options), device_(device), enabled_(enabled) {
  if (enabled_) {
    NMT_CHECK(options.init_scale > 0, nmt::ConfigError, "amp.init_scale: expected > 0, found {}",
              options.init_scale);
    NMT_CHECK(options.growth_factor > 1, nmt::ConfigError,
              "amp.growth_factor: expected > 1, found {}", options.growth_factor);
    NMT_CHECK(options.backoff_factor > 0 && options.backoff_factor < 1, nmt::ConfigError,
              "amp.backoff_factor: expected in (0, 1), found {}", options.backoff_factor);
    NMT_CHECK(options.growth_interval >= 1, nmt::ConfigError,
              "amp.growth_interval: expected >= 1, found {}", options.growth_interval);
  }
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  scale_ = at::full({1}, enabled_ ? options.init_scale : 1.0, f32);
  growth_tracker_ = at::zeros({1}, f32.dtype(at::kInt));
  found_inf_ = at::zeros({1}, f32);
  skipped_total_ = at::zeros({1}, f32.dtype(at::kLong));
  consecutive_skips_ = at::zeros({1}, f32.dtype(at::kLong));
  one_ = at::ones({1}, f32);
}

at::Tensor DynamicLossScaler::scale(const at::Tensor& loss) const {
  if (!enabled_) return loss;
  // A 0-dim view keeps a scalar loss scalar (GradScaler returns shape [1]).
  return loss * scale_.view(c10::IntArrayRef{});
}

void DynamicLossScaler::unscale_(const std::vector<at::Tensor>& grads,
                                 const at::Tensor& extra_divisor) {
  found_inf_.zero_();
  if (grads.empty()) return;
  at::Tensor inv_scale;
  if (extra_divisor.defined()) {
    // float32 is exact for power-of-two scales times counts below 2^24 tokens.
    const at::Tensor divisor = extra_divisor.to(device_, at::kFloat).reshape({1});
    inv_scale = (enabled_ ? scale_ * divisor : divisor).reciprocal();
  } else {
    inv_scale = enabled_ ? scale_.reciprocal() : one_;
  }
  // One fused multi-tensor pass: multiply by inv_scale and flag inf/NaN. With scaling off
  // this is still the cheapest way to normalize by the token count and catch NaNs.
  at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, inv_scale);
}

void DynamicLossScaler::update() {
  if (enabled_) {
    at::_amp_update_scale_(scale_, growth_tracker_, found_inf_, options_.growth_factor,
                           options_.backoff_factor, options_.growth_interval);
  }
  const at::Tensor skipped = found_inf_.to(at::kLong);
  skipped_total_.add_(skipped);
  consecutive_skips_.add_(1).mul_(skipped);
}

ScalerStats DynamicLossScaler::stats() const {
  // One device-to-host copy for all three (int64 counters are exact in double below 2^53).
  const at::Tensor host = at::cat({scale_.to(at::kDouble), skipped_total_.to(at::kDouble),
                                   consecutive_skips_.to(at::kDouble)})
                              .cpu();
  const double* v = host.data_ptr<double>();
  return {v[0], static_cast<int64_t>(v[1]), static_cast<int64_t>(v[2])};
}

void DynamicLossScaler::check(int64_t step) const {
  const ScalerStats s = stats();
  if (options_.max_consecutive_skips > 0 && s.consecutive_skips >= options_.max_consecutive_skips) {
    if (enabled_) {
      NMT_THROW(nmt::Error,
                "step {}: {} consecutive steps overflowed (loss scale {}): training diverged; "
                "lower the learning rate or use bf16",
                step, s.consecutive_skips, s.scale);
    }
    NMT_THROW(nmt::Error,
              "step {}: {} consecutive steps had non-finite gradients: training diverged; lower "
              "the learning rate",
              step, s.consecutive_skips);
  }
  NMT_CHECK(!enabled_ || s.scale >= options_.min_scale, nmt::Error,
            "step {}: loss scale {} fell below amp.min_scale {} ({} steps skipped in all): "
            "training diverged; lower the learning rate or use bf16",
            step, s.scale, options_.min_scale, s.skipped_total);
}

checkpoint::NamedTensors DynamicLossScaler::state() const {
  namespace field = checkpoint::scaler_field;
  checkpoint::NamedTensors out;
  out.emplace_back(field::kScale, cpu_copy(scale_));
  out.emplace_back(field::kEnabled, at::full({1}, enabled_ ? 1 : 0, at::kByte));
  out.emplace_back(field::kGrowthTracker, cpu_copy(growth_tracker_));
  out.emplace_back(field::kSkippedTotal, cpu_copy(skipped_total_));
  out.emplace_back(field::kConsecutiveSkips, cpu_copy(consecutive_skips_));
  return out;
}

void DynamicLossScaler::load_state(const checkpoint::TensorFinder& find) {
  namespace field = checkpoint::scaler_field;
  // A run without scaling saved scale 1 (older checkpoints do not say so, but only that state
  // has scale 1 with a zero growth tracker in practice). An fp16 run adopting it would
  // underflow small gradients until the scale grew back, one doubling per growth_interval:
  // it starts from init_scale instead.
  const at::Tensor* saved_enabled = find(field::kEnabled);
  const at::Tensor* saved_scale = find(field::kScale);
  const at::Tensor* saved_tracker = find(field::kGrowthTracker);
  const bool saved_unscaled =
      saved_enabled && saved_enabled->defined()
          ? saved_enabled->item<int64_t>() == 0
          : saved_scale && saved_scale->defined() && saved_scale->numel() == 1 &&
                saved_scale->item<double>() == 1.0 && saved_tracker && saved_tracker->defined() &&
                saved_tracker->numel() == 1 && saved_tracker->item<int64_t>() == 0;
  if (enabled_ && saved_unscaled) {
    log::info("amp", "the checkpoint was trained without fp16 loss scaling: loss scaling starts "
              "at amp.init_scale {:g}", options_.init_scale);
  } else if (enabled_) {
    restore(find, field::kScale, scale_);
    restore(find, field::kGrowthTracker, growth_tracker_);
  }
  restore(find, field::kSkippedTotal, skipped_total_);
  restore(find, field::kConsecutiveSkips, consecutive_skips_);
}

}  // namespace nmt::amp
