#include "amp/autocast.h"

#include <ATen/autocast_mode.h>
#ifdef NMT_WITH_CUDA
#include <ATen/cuda/CUDAContextLight.h>
#endif

#include "util/error.h"

namespace nmt::amp {

c10::ScalarType autocast_dtype(AmpMode mode) {
  switch (mode) {
    case AmpMode::kFp16:
      return c10::kHalf;
    case AmpMode::kBf16:
      return c10::kBFloat16;
    case AmpMode::kOff:
      break;
  }
  return c10::kFloat;
}

bool autocast_supported(AmpMode mode, c10::DeviceType device_type) {
  if (mode == AmpMode::kOff) return true;
  if (device_type == c10::DeviceType::CPU) return true;
  if (device_type != c10::DeviceType::CUDA || !at::hasCUDA()) return false;
  if (mode == AmpMode::kFp16) return true;
#ifdef NMT_WITH_CUDA
  // bf16 tensor-core math (and most bf16 kernels) need Ampere; torch.autocast refuses it below.
  return at::cuda::getCurrentDeviceProperties()->major >= 8;
#else
  return false;
#endif
}

AutocastScope::AutocastScope(AmpMode mode, c10::DeviceType device_type)
    : device_type_(device_type) {
  if (mode == AmpMode::kOff) return;
  NMT_CHECK(device_type == c10::DeviceType::CPU || device_type == c10::DeviceType::CUDA, nmt::Error,
            "amp: autocast: expected a CPU or CUDA device, found {}",
            c10::DeviceTypeName(device_type));
  // The same steps, in the same order, as torch.autocast.__enter__.
  prev_cache_enabled_ = at::autocast::is_autocast_cache_enabled();
  prev_enabled_ = at::autocast::is_autocast_enabled(device_type);
  prev_dtype_ = at::autocast::get_autocast_dtype(device_type);
  at::autocast::set_autocast_enabled(device_type, true);
  at::autocast::set_autocast_dtype(device_type, autocast_dtype(mode));
  at::autocast::increment_nesting();
  active_ = true;
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // As torch.autocast.__exit__: the cast cache (fp32 weights cast once per forward) lives
  // until the outermost region ends; keeping it longer would pin stale copies of weights.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, prev_enabled_);
  at::autocast::set_autocast_dtype(device_type_, prev_dtype_);
  at::autocast::set_autocast_cache_enabled(prev_cache_enabled_);
}

}  // namespace nmt::amp
