#include "dist/random_state.h"

#include <mutex>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include "util/error.h"

#ifdef NMT_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

namespace nmt::dist {
namespace {

at::Generator generator_of(const std::string& kind, c10::Device device) {
  if (kind == "cpu") return at::detail::getDefaultCPUGenerator();
#ifdef NMT_WITH_CUDA
  if (kind == "cuda" && device.is_cuda())
    return at::cuda::detail::getDefaultCUDAGenerator(device.index());
#endif
  NMT_THROW(DeviceError, "no {} random generator on {} in this build", kind, device.str());
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> generator_states(c10::Device device) {
  std::vector<std::pair<std::string, at::Tensor>> states;
  std::vector<std::string> kinds{"cpu"};
  if (device.is_cuda()) kinds.emplace_back("cuda");
  for (const std::string& kind : kinds) {
    at::Generator gen = generator_of(kind, device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    states.emplace_back(kind, gen.get_state());
  }
  return states;
}

void set_generator_state(const std::string& kind, c10::Device device, const at::Tensor& state) {
  at::Generator gen = generator_of(kind, device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

}  // namespace nmt::dist
