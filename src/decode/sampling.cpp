#include "decode/sampling.h"

#include <algorithm>
#include <tuple>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "util/error.h"

namespace nmt::decode {
namespace {

/// SplitMix64's finalizer (Steele et al. 2014): a bijection of 64-bit words whose output bits
/// each depend on every input bit.
uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

float sample_uniform(uint64_t seed, int64_t sentence, int64_t step) {
  uint64_t h = mix(seed);
  h = mix(h ^ static_cast<uint64_t>(sentence));
  h = mix(h ^ static_cast<uint64_t>(step));
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // top 24 bits / 2^24
}

at::Tensor sample_tokens(const at::Tensor& lprobs, const SamplingOptions& options,
                         const std::vector<int64_t>& sentences, int64_t step) {
  TORCH_CHECK(lprobs.dim() == 2 && lprobs.scalar_type() == at::kFloat,
              "sample_tokens: expected float32 log-probabilities [R, V], found ",
              lprobs.scalar_type(), " ", lprobs.sizes());
  const int64_t rows = lprobs.size(0);
  const int64_t vocab = lprobs.size(1);
  TORCH_CHECK(static_cast<int64_t>(sentences.size()) == rows, "sample_tokens: ", rows,
              " rows but ", sentences.size(), " sentence ids");
  const at::Tensor scaled =
      options.temperature == 1.0 ? lprobs : lprobs / options.temperature;
  // Sorted descending, so banned tokens (probability 0) come last and the cumulative sum adds
  // small numbers to large ones in a fixed order.
  at::Tensor values, index;
  if (options.top_k > 0 && options.top_k < vocab)
    std::tie(values, index) = scaled.topk(options.top_k, 1, /*largest=*/true, /*sorted=*/true);
  else
    std::tie(values, index) = scaled.sort(/*stable=*/true, 1, /*descending=*/true);
  const at::Tensor probs = values.softmax(1);
  const at::Tensor cdf = probs.cumsum(1);
  std::vector<float> u(rows);
  for (int64_t r = 0; r < rows; ++r) u[r] = sample_uniform(options.seed, sentences[r], step);
  const at::Tensor target =
      at::tensor(u).to(lprobs.device()).unsqueeze(1) * cdf.narrow(1, cdf.size(1) - 1, 1);
  // right=true: the first position whose cumulative sum exceeds the target, which has p > 0;
  // rounding can put the target at the total, so cap at the last allowed position.
  at::Tensor pick = at::searchsorted(cdf, target, /*out_int32=*/false, /*right=*/true);
  const at::Tensor last_allowed = probs.gt(0).sum(1, /*keepdim=*/true) - 1;
  pick = at::minimum(pick, last_allowed);
  return index.gather(1, pick).squeeze(1);
}

std::string describe(const SamplingOptions& options) {
  std::string spec;
  if (options.top_k > 0) spec = fmt::format("topk:{}", options.top_k);
  if (options.temperature != 1.0 || spec.empty())
    spec += fmt::format("{}temperature:{}", spec.empty() ? "" : ",", options.temperature);
  return fmt::format("{} seed {}", spec, options.seed);
}

}  // namespace nmt::decode
