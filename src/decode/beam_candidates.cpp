#include "decode/beam_candidates.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>

namespace nmt::decode {
namespace {

/// Log-probabilities are scanned in blocks of this many: one vectorized count of those that
/// might enter the list, then a scalar pass over the block only when some might.
constexpr int64_t kBlock = 128;

/// How many of x[0, count) are > bound. Compiled for AVX-512 and AVX2 besides the baseline and
/// picked at load time by the CPU (GCC function multi-versioning), so that a binary built for
/// any x86-64 runs the widest vectors the machine has.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
int64_t
count_above(const float* x, int64_t count, float bound) {
  int64_t above = 0;
  for (int64_t i = 0; i < count; ++i) above += x[i] > bound ? 1 : 0;
  return above;
}

/// The best `width` (value, index) pairs seen so far, best first, ties by lower index (pairs are
/// offered in index order, and an equal value never displaces an earlier one).
class BestList {
 public:
  explicit BestList(int64_t width) : width_(width) {
    values_.reserve(width);
    index_.reserve(width);
  }

  /// Empties the list for the next sentence (its storage is kept).
  void clear() {
    values_.clear();
    index_.clear();
  }

  bool full() const { return static_cast<int64_t>(values_.size()) == width_; }
  /// The value a pair must exceed to enter a full list.
  float threshold() const { return values_.back(); }

  void offer(float value, int64_t index) {
    if (std::isnan(value)) value = -std::numeric_limits<float>::infinity();
    if (full()) {
      if (!(value > values_.back())) return;
      values_.pop_back();
      index_.pop_back();
    }
    // After every value >= this one: equal values keep their (lower) indices first.
    const auto at = std::upper_bound(values_.begin(), values_.end(), value,
                                     [](float v, float in_list) { return v > in_list; });
    const auto position = at - values_.begin();
    values_.insert(at, value);
    index_.insert(index_.begin() + position, index);
  }

  void write(float* values, int64_t* index) const {
    std::copy(values_.begin(), values_.end(), values);
    std::copy(index_.begin(), index_.end(), index);
  }

 private:
  int64_t width_;
  std::vector<float> values_;
  std::vector<int64_t> index_;
};

/// The lowest log-probability that could give score + x > threshold in float32 arithmetic,
/// less a margin of a few units in the last place, so that the prefilter never drops a pair
/// the exact test would keep. NaN (score -inf with threshold -inf) drops everything, which is
/// right: -inf + x never exceeds -inf.
float lprob_bound(float threshold, float score) {
  const float margin = 1e-6f * (std::fabs(threshold) + std::fabs(score)) + 1e-30f;
  return threshold - score - margin;
}

/// Offers every (score + row[v], offset + v) of one beam row to best.
void scan_row(const float* row, int64_t vocab, float score, int64_t offset, BestList& best) {
  int64_t v = 0;
  for (; v < vocab && !best.full(); ++v) best.offer(score + row[v], offset + v);
  while (v < vocab) {
    const int64_t end = std::min(vocab, v + kBlock);
    if (count_above(row + v, end - v, lprob_bound(best.threshold(), score)) > 0) {
      for (; v < end; ++v) {
        const float value = score + row[v];
        if (value > best.threshold()) best.offer(value, offset + v);
      }
    }
    v = end;
  }
}

Candidates best_candidates_cpu(const at::Tensor& scores, const at::Tensor& lprobs, int64_t n,
                               int64_t beam, Candidates c) {
  const at::Tensor row_scores = scores.contiguous();
  const at::Tensor rows = lprobs.contiguous();
  c.values = at::empty({n, c.width}, at::kFloat);
  c.index = at::empty({n, c.width}, at::kLong);
  const float* score = row_scores.data_ptr<float>();
  const float* lprob = rows.data_ptr<float>();
  float* values = c.values.data_ptr<float>();
  int64_t* index = c.index.data_ptr<int64_t>();
  BestList best(c.width);
  for (int64_t i = 0; i < n; ++i) {
    best.clear();
    for (int64_t k = 0; k < beam; ++k) {
      const int64_t row = i * beam + k;
      scan_row(lprob + row * c.vocab, c.vocab, score[row], k * c.vocab, best);
    }
    best.write(values + i * c.width, index + i * c.width);
  }
  return c;
}

}  // namespace

Candidates best_candidates(const at::Tensor& scores, const at::Tensor& lprobs, int64_t n,
                           int64_t beam) {
  TORCH_CHECK(lprobs.dim() == 2 && lprobs.size(0) == n * beam && scores.dim() == 1 &&
                  scores.size(0) == n * beam,
              "best_candidates: expected scores [", n * beam, "] and log-probabilities [", n * beam,
              ", V], found ", scores.sizes(), " and ", lprobs.sizes());
  TORCH_CHECK(lprobs.scalar_type() == at::kFloat && scores.scalar_type() == at::kFloat,
              "best_candidates: expected float32, found ", scores.scalar_type(), " and ",
              lprobs.scalar_type());
  Candidates c;
  c.vocab = lprobs.size(1);
  c.width = std::min(2 * beam, beam * c.vocab);
  if (lprobs.is_cpu() && scores.is_cpu()) return best_candidates_cpu(scores, lprobs, n, beam, c);
  const at::Tensor candidates = (scores.unsqueeze(1) + lprobs).view({n, beam * c.vocab});
  auto [top_values, top_index] = candidates.topk(c.width, 1);
  c.values = top_values.to(at::kCPU).contiguous();
  c.index = top_index.to(at::kCPU).contiguous();
  return c;
}

std::tuple<at::Tensor, at::Tensor> best_tokens(const at::Tensor& lprobs) {
  TORCH_CHECK(lprobs.dim() == 2 && lprobs.scalar_type() == at::kFloat,
              "best_tokens: expected float32 log-probabilities [R, V], found ",
              lprobs.scalar_type(), " ", lprobs.sizes());
  if (!lprobs.is_cpu()) return lprobs.max(1);
  const int64_t rows = lprobs.size(0);
  const Candidates c = best_candidates(at::zeros({rows}, at::kFloat), lprobs, rows, /*beam=*/1);
  return {c.values.select(1, 0).contiguous(), c.index.select(1, 0).contiguous()};
}

}  // namespace nmt::decode
