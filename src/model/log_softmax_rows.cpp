#include "model/log_softmax_rows.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

namespace nmt::model {
namespace {

// The vector helpers are inlined into the per-ISA entry points below, never called across an
// ABI boundary (model/vector_lanes.h).
#pragma GCC diagnostic ignored "-Wpsabi"
using lanes::broadcast;
using lanes::exp_nonpositive;
using lanes::lane_max;
using lanes::lane_sum;
using lanes::Lanes;
using lanes::load;
using lanes::store;

/// One row of n floats, in place.
template <int W>
__attribute__((always_inline)) inline void log_softmax_row(float* x, int64_t n) {
  using Vec = typename Lanes<W>::Vec;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  Vec max_lanes = broadcast<W>(neg_inf);
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const Vec v = load<Vec>(x + i);
    max_lanes = v > max_lanes ? v : max_lanes;
  }
  float max = lane_max<W>(max_lanes);
  for (; i < n; ++i) max = std::max(max, x[i]);
  // A NaN entry (which the maximum skips), or a row of nothing but -inf (-inf less -inf), makes
  // an exp NaN, so the sum and then every entry: NaN, as at::log_softmax gives.
  Vec partial = {};
  for (i = 0; i + W <= n; i += W) {
    partial += exp_nonpositive<W>(load<Vec>(x + i) - max);
  }
  float sum = lane_sum<W>(partial);
  for (; i < n; ++i) sum += exp_nonpositive(x[i] - max);
  const float log_sum = std::log(sum);
  for (i = 0; i + W <= n; i += W) store(x + i, (load<Vec>(x + i) - max) - log_sum);
  for (; i < n; ++i) x[i] = (x[i] - max) - log_sum;
}

using RowKernel = void (*)(float*, int64_t);

template <int W>
void portable_row(float* x, int64_t n) {
  log_softmax_row<W>(x, n);
}

#ifdef NMT_X86_KERNELS
__attribute__((target("avx512f,fma"))) void avx512_row(float* x, int64_t n) {
  log_softmax_row<16>(x, n);
}
__attribute__((target("avx2,fma"))) void avx2_row(float* x, int64_t n) { log_softmax_row<8>(x, n); }
#endif

RowKernel kernel_for(VectorLanes lanes) {
  switch (lanes_for(lanes)) {
    case 16:
#ifdef NMT_X86_KERNELS
      if (has_avx512()) return avx512_row;
#endif
      return portable_row<16>;
    case 8:
#ifdef NMT_X86_KERNELS
      if (has_avx2_fma()) return avx2_row;
#endif
      return portable_row<8>;
    default:
      return portable_row<4>;
  }
}

}  // namespace

void log_softmax_rows_(at::Tensor& logits, VectorLanes lanes) {
  TORCH_CHECK(logits.dim() == 2, "log_softmax_rows_: expected logits [rows, V], found ",
              logits.sizes());
  if (!logits.is_cpu() || logits.scalar_type() != at::kFloat || !logits.is_contiguous()) {
    logits.copy_(logits.log_softmax(-1));
    return;
  }
  const int64_t rows = logits.size(0), n = logits.size(1);
  if (rows == 0 || n == 0) return;
  float* data = logits.mutable_data_ptr<float>();
  const RowKernel kernel = kernel_for(lanes);
  // Rows of 8,000 floats or so: a few rows per piece is plenty for a thread.
  const int64_t grain = std::max<int64_t>(1, 32768 / n);
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) kernel(data + r * n, n);
  });
}

}  // namespace nmt::model
