#include "model/dropout.h"

#include <cmath>
#include <cstdint>
#include <mutex>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include "util/hash.h"

namespace nmt::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// out[i] = in[i] * scale where the i-th 16-bit lane of splitmix64(seed + i / 4) is at least
/// `threshold`, else 0. The mask depends on the seed and i only, not on the thread count.
template <typename scalar_t>
void apply_mask(const scalar_t* in, scalar_t* out, int64_t n, uint64_t seed, uint32_t threshold,
                float scale) {
  constexpr int64_t kGrain = 1 << 14;  // a multiple of 4: each word serves 4 elements
  at::parallel_for(0, (n + 3) / 4, kGrain / 4, [&](int64_t begin, int64_t end) {
    for (int64_t word = begin; word < end; ++word) {
      uint64_t bits = splitmix64(seed + static_cast<uint64_t>(word));
      const int64_t first = word * 4;
      const int64_t last = std::min<int64_t>(first + 4, n);
      for (int64_t i = first; i < last; ++i, bits >>= 16) {
        const bool keep = (bits & 0xFFFF) >= threshold;
        out[i] = keep ? static_cast<scalar_t>(static_cast<float>(in[i]) * scale) : scalar_t(0);
      }
    }
  });
}

/// Runs apply_mask over a tensor (made contiguous) into a new tensor like it.
at::Tensor masked(const at::Tensor& input, uint64_t seed, uint32_t threshold, float scale) {
  const at::Tensor in = input.contiguous();
  at::Tensor out = at::empty_like(in);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, in.scalar_type(), "nmt_dropout", [&] {
    apply_mask<scalar_t>(in.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(),
                         in.numel(), seed, threshold, scale);
  });
  return out;
}

class CpuDropout : public torch::autograd::Function<CpuDropout> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, double p) {
    uint64_t seed = 0;
    {
      auto generator = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(generator.mutex());
      seed = at::check_generator<at::CPUGeneratorImpl>(generator)->random64();
    }
    const auto threshold = static_cast<uint32_t>(std::lround(p * 65536.0));
    // The exact keep probability after rounding p, so the expectation stays the input.
    const float scale = 65536.0f / static_cast<float>(65536 - threshold);
    ctx->saved_data["seed"] = static_cast<int64_t>(seed);
    ctx->saved_data["threshold"] = static_cast<int64_t>(threshold);
    ctx->saved_data["scale"] = static_cast<double>(scale);
    return masked(input, seed, threshold, scale);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
    const auto threshold = static_cast<uint32_t>(ctx->saved_data["threshold"].toInt());
    const auto scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
    return {masked(grad_outputs[0], seed, threshold, scale), at::Tensor()};
  }
};

}  // namespace

at::Tensor dropout(const at::Tensor& input, double p, bool training) {
  if (!training || p <= 0.0) return input;
  if (!input.is_cpu() || p >= 1.0 || !at::isFloatingType(input.scalar_type()))
    return at::dropout(input, p, training);
  return CpuDropout::apply(input, p);
}

}  // namespace nmt::model
