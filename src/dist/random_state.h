#pragma once
// The random generator states of this process, for checkpoints: the CPU generator and, on a
// GPU, that device's CUDA generator. The CUDA switch lives here, not in the training loop.

#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace nmt::dist {

/// This process's generator states by kind: ("cpu", state), and ("cuda", state) when `device`
/// is a CUDA device. Each state is a byte tensor on the CPU.
std::vector<std::pair<std::string, at::Tensor>> generator_states(c10::Device device);

/// Restores a state that generator_states returned for `kind` ("cpu" or "cuda"). Throws
/// DeviceError for "cuda" in a build or on a device without CUDA.
void set_generator_state(const std::string& kind, c10::Device device, const at::Tensor& state);

}  // namespace nmt::dist
