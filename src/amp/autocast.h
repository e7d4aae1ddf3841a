#pragma once
// Autocast regions for mixed-precision forward passes, the C++ counterpart of torch.autocast.

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include "amp/amp_options.h"

namespace nmt::amp {

/// The autocast dtype of a mode: kHalf for kFp16, kBFloat16 for kBf16, kFloat for kOff.
c10::ScalarType autocast_dtype(AmpMode mode);

/// True when autocast can run `mode` on `device_type` in this process: kOff always; on CPU
/// fp16 and bf16; on CUDA fp16 when a device is visible, bf16 only on compute capability
/// >= 8.0 (Ampere). Queries the device, so call it once at start-up, not per step.
bool autocast_supported(AmpMode mode, c10::DeviceType device_type);

/// RAII autocast region, like `with torch.autocast(device_type, dtype)`: for kFp16/kBf16 it
/// enables autocast for device_type (CPU or CUDA) with the mode's dtype and restores the
/// previous state on destruction, dropping the cast cache when the outermost region ends.
/// kOff changes nothing (an enclosing region stays in effect). Scopes nest. Cheap enough to
/// open per micro-batch; it does not check autocast_supported (do that once at start-up).
///   { AutocastScope autocast(AmpMode::kBf16, c10::DeviceType::CUDA); logits = model(batch); }
/// Autocast state is thread-local: open the scope in the thread that runs the forward pass.
class AutocastScope {
 public:
  /// Throws nmt::Error for a device type other than CPU or CUDA (unless mode is kOff).
  AutocastScope(AmpMode mode, c10::DeviceType device_type);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;                       ///< this scope changed the autocast state
  c10::DeviceType device_type_;               ///< device whose autocast state it changed
  bool prev_enabled_ = false;                 ///< autocast enabled before the scope
  c10::ScalarType prev_dtype_ = c10::kFloat;  ///< autocast dtype before the scope
  bool prev_cache_enabled_ = true;            ///< cast cache enabled before the scope
};

}  // namespace nmt::amp
