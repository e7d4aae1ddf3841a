#include "decode/sampling.h"

#include <algorithm>
#include <tuple>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "util/error.h"
#include "util/hash.h"

namespace nmt::decode {
namespace {

/// Inverse-CDF draw per row of probs [R, N] (rows sum to 1, zeros allowed) with uniform
/// [R, 1]: the first position whose cumulative sum (in float64, so that a vocabulary of
/// 32k adds up without visible rounding) exceeds u x total. right=true skips zero-probability
/// positions; rounding can put the target at the total, so such rows take their last
/// position of nonzero probability. Returns int64 positions [R, 1].
at::Tensor draw_position(const at::Tensor& probs, const at::Tensor& uniform) {
  const at::Tensor cdf = probs.to(at::kDouble).cumsum(1);
  const int64_t n = probs.size(1);
  const at::Tensor target = uniform.to(at::kDouble) * cdf.narrow(1, n - 1, 1);
  const at::Tensor pick = at::searchsorted(cdf, target, /*out_int32=*/false, /*right=*/true);
  const at::Tensor positions = at::arange(n, probs.options().dtype(at::kLong)).unsqueeze(0);
  const at::Tensor last_allowed =
      std::get<0>(positions.masked_fill(probs.le(0), -1).max(1, /*keepdim=*/true));
  return at::minimum(pick, last_allowed);
}

}  // namespace

float sample_uniform(uint64_t seed, int64_t sentence, int64_t step) {
  uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ static_cast<uint64_t>(sentence));
  h = splitmix64(h ^ static_cast<uint64_t>(step));
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
  // Shifted by the row's maximum before the division, so that the best token stays at 0
  // whatever T: unshifted, a tiny T sends every value to -inf and softmax to NaN.
  const at::Tensor scaled =
      options.temperature == 1.0
          ? lprobs
          : (lprobs - std::get<0>(lprobs.max(1, /*keepdim=*/true))) / options.temperature;
  std::vector<float> u(rows);
  for (int64_t r = 0; r < rows; ++r) u[r] = sample_uniform(options.seed, sentences[r], step);
  const at::Tensor uniform = at::tensor(u).to(lprobs.device()).unsqueeze(1);
  if (options.top_k > 0 && options.top_k < vocab) {
    // The k best, sorted descending (ties in a fixed order), renormalized.
    auto [values, index] = scaled.topk(options.top_k, 1, /*largest=*/true, /*sorted=*/true);
    return index.gather(1, draw_position(values.softmax(1), uniform)).squeeze(1);
  }
  // The whole vocabulary in id order (no sort: it would cost more than a small model's step).
  return draw_position(scaled.softmax(1), uniform).squeeze(1);
}

std::string describe(const SamplingOptions& options) {
  std::string spec;
  if (options.top_k > 0) spec = fmt::format("topk:{}", options.top_k);
  if (options.temperature != 1.0 || spec.empty())
    spec += fmt::format("{}temperature:{}", spec.empty() ? "" : ",", options.temperature);
  return fmt::format("{} seed {}", spec, options.seed);
}

}  // namespace nmt::decode
