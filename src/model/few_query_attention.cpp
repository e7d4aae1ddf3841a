#include "model/few_query_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

namespace nmt::model {
namespace {

/// Pointers and strides (in elements) of one row and head. The last dimension of q, key and
/// value is contiguous; mask's strides come from its broadcast to [B, heads, Q, S].
struct HeadArgs {
  const float* q;
  int64_t q_stride;  // between queries
  const float* key;
  int64_t key_stride;  // between positions
  const float* value;
  int64_t value_stride;
  const bool* mask;  // nullptr: every key
  int64_t mask_query_stride;
  int64_t mask_key_stride;
  int64_t queries;
  int64_t keys;
  int64_t d_head;
  float scale;
  float* out;  // the first query's context; queries are out_stride apart
  int64_t out_stride;
  float* scores;  // room for queries x keys floats, a query's keys contiguous
};

// The kernel's vector helpers (model/vector_lanes.h) are inlined into the per-ISA entry points
// below, never called across an ABI boundary.
#pragma GCC diagnostic ignored "-Wpsabi"
using lanes::exp_nonpositive;
using lanes::lane_max;
using lanes::lane_sum;
using lanes::Lanes;
using lanes::load;
using lanes::store;

/// Lanes 0, 2, 4, ... and 1, 3, 5, ... of a and b side by side: their sum holds a's pairs' sums,
/// then b's.
template <typename Vec, std::size_t... I>
__attribute__((always_inline)) inline Vec pair_sums(Vec a, Vec b, std::index_sequence<I...>) {
  return __builtin_shufflevector(a, b, (2 * I)...) + __builtin_shufflevector(a, b, (2 * I + 1)...);
}

/// The W sums of W vectors' lanes, the j-th in lane j: pairs of vectors become one of pair sums,
/// log2(W) times. One such transposing sum serves W dot products, where summing each vector
/// apart takes log2(W) shuffles and adds per dot product.
template <int W>
__attribute__((always_inline)) inline typename Lanes<W>::Vec transposed_sums(
    typename Lanes<W>::Vec* v) {
#pragma GCC unroll 16
  for (int n = W; n > 1; n /= 2)
#pragma GCC unroll 16
    for (int j = 0; j < n / 2; ++j)
      v[j] = pair_sums(v[2 * j], v[2 * j + 1], std::make_index_sequence<W>{});
  return v[0];
}

/// One row and head, first half: each query's attention weights (softmax of its scores) into
/// a.scores, queries a.keys apart; a query with nothing to attend to gets NaN weights.
/// Scores come W keys at a time: W accumulators, one a key, summed over the head's columns W
/// at a time, then transposed into one vector of W scores. The last block of keys reads the
/// last key again in place of the missing ones and keeps only its real scores.
template <int W>
__attribute__((always_inline)) inline void head_weights(const HeadArgs& a) {
  using Vec = typename Lanes<W>::Vec;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const int64_t d = a.d_head, vector_columns = d / W * W;
  for (int64_t qi = 0; qi < a.queries; ++qi) {
    const float* q = a.q + qi * a.q_stride;
    float* scores = a.scores + qi * a.keys;
    for (int64_t s = 0; s < a.keys; s += W) {
      const float* rows[W];
      for (int j = 0; j < W; ++j)
        rows[j] = a.key + std::min<int64_t>(s + j, a.keys - 1) * a.key_stride;
      Vec sums[W] = {};
      for (int64_t i = 0; i < vector_columns; i += W) {
        const Vec qv = load<Vec>(q + i);
#pragma GCC unroll 16
        for (int j = 0; j < W; ++j) sums[j] += qv * load<Vec>(rows[j] + i);
      }
      float block[W];
      store(block, transposed_sums<W>(sums));
      const int64_t n = std::min<int64_t>(W, a.keys - s);
      for (int64_t j = 0; j < n; ++j) {
        float tail = 0.0f;  // the columns past the last multiple of W
        for (int64_t i = vector_columns; i < d; ++i) tail += q[i] * rows[j][i];
        scores[s + j] = (block[j] + tail) * a.scale;
      }
    }
    if (a.mask) {
      const bool* mask = a.mask + qi * a.mask_query_stride;
      for (int64_t s = 0; s < a.keys; ++s)
        if (!mask[s * a.mask_key_stride]) scores[s] = neg_inf;
    }
    Vec max_lanes;
    for (int j = 0; j < W; ++j) max_lanes[j] = neg_inf;
    int64_t s = 0;
    for (; s + W <= a.keys; s += W) {
      const Vec v = load<Vec>(scores + s);
      max_lanes = v > max_lanes ? v : max_lanes;
    }
    float max = lane_max<W>(max_lanes);
    for (; s < a.keys; ++s) max = std::max(max, scores[s]);
    if (max == neg_inf) {  // nothing to attend to
      std::fill(scores, scores + a.keys, std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    for (s = 0; s < a.keys; ++s) scores[s] = exp_nonpositive(scores[s] - max);
    Vec partial = {};
    for (s = 0; s + W <= a.keys; s += W) partial += load<Vec>(scores + s);
    float sum = lane_sum<W>(partial);
    for (; s < a.keys; ++s) sum += scores[s];
    const float norm = 1.0f / sum;
    for (s = 0; s < a.keys; ++s) scores[s] *= norm;
  }
}

/// Columns [i, i + R * W) of one query's context: R vectors stay in registers while the values
/// are summed into them. Masked keys weigh 0 and are skipped, so that a NaN or infinite value
/// there has no effect; NaN weights make a NaN context.
template <int W, int R>
__attribute__((always_inline)) inline void context_columns(const HeadArgs& a, const float* weights,
                                                           float* out, int64_t i) {
  using Vec = typename Lanes<W>::Vec;
  Vec sums[R] = {};
  for (int64_t s = 0; s < a.keys; ++s) {
    const float w = weights[s];
    if (w == 0.0f) continue;
    const float* value = a.value + s * a.value_stride + i;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) sums[r] += w * load<Vec>(value + r * W);
  }
  for (int r = 0; r < R; ++r) store(out + i + r * W, sums[r]);
}

/// One row and head, second half: each query's context, the sum of values by the weights in
/// a.scores, four vectors of columns at a time (then two, then one, then single columns).
template <int W>
__attribute__((always_inline)) inline void head_context(const HeadArgs& a) {
  const int64_t d = a.d_head;
  for (int64_t qi = 0; qi < a.queries; ++qi) {
    const float* weights = a.scores + qi * a.keys;
    float* out = a.out + qi * a.out_stride;
    int64_t i = 0;
    for (; i + 4 * W <= d; i += 4 * W) context_columns<W, 4>(a, weights, out, i);
    for (; i + 2 * W <= d; i += 2 * W) context_columns<W, 2>(a, weights, out, i);
    for (; i + W <= d; i += W) context_columns<W, 1>(a, weights, out, i);
    for (; i < d; ++i) {
      float sum = 0.0f;
      for (int64_t s = 0; s < a.keys; ++s)
        if (weights[s] != 0.0f) sum += weights[s] * a.value[s * a.value_stride + i];
      out[i] = sum;
    }
  }
}

/// A width's two halves, compiled for the instruction set that runs it best.
struct HeadKernels {
  void (*weights)(const HeadArgs&);
  void (*context)(const HeadArgs&);
};

template <int W>
void portable_weights(const HeadArgs& a) {
  head_weights<W>(a);
}
template <int W>
void portable_context(const HeadArgs& a) {
  head_context<W>(a);
}

#ifdef NMT_X86_KERNELS
// Each width compiled for the instruction set whose registers hold it, with fused multiply-adds;
// picked at run time where the processor has them. (The kernel before was one 16-lane function
// cloned by GCC's target_clones: on AVX2 its clone split every 16-lane value into two registers
// and kept them on the stack, and it took 2.5x the time of this one in a greedy decoding profile
// on an AMD EPYC.)
__attribute__((target("avx512f,fma"))) void avx512_weights(const HeadArgs& a) {
  head_weights<16>(a);
}
__attribute__((target("avx512f,fma"))) void avx512_context(const HeadArgs& a) {
  head_context<16>(a);
}
__attribute__((target("avx2,fma"))) void avx2_weights(const HeadArgs& a) { head_weights<8>(a); }
__attribute__((target("avx2,fma"))) void avx2_context(const HeadArgs& a) { head_context<8>(a); }
#endif

HeadKernels kernels_for(VectorLanes lanes) {
  switch (lanes_for(lanes)) {
    case 16:
#ifdef NMT_X86_KERNELS
      if (has_avx512()) return {avx512_weights, avx512_context};
#endif
      return {portable_weights<16>, portable_context<16>};
    case 8:
#ifdef NMT_X86_KERNELS
      if (has_avx2_fma()) return {avx2_weights, avx2_context};
#endif
      return {portable_weights<8>, portable_context<8>};
    default:
      return {portable_weights<4>, portable_context<4>};
  }
}

/// t with its last dimension contiguous (a copy only where it is not).
at::Tensor last_dim_contiguous(const at::Tensor& t) {
  return t.stride(-1) == 1 || t.size(-1) == 1 ? t : t.contiguous();
}

}  // namespace

at::Tensor attend_few_queries(const at::Tensor& q_in, const at::Tensor& key_in,
                              const at::Tensor& value_in, const at::Tensor& mask_in, double scale,
                              VectorLanes lanes) {
  TORCH_CHECK(q_in.dim() == 4 && key_in.dim() == 4 && value_in.sizes() == key_in.sizes(),
              "attend_few_queries: expected q [B, heads, Q, d] and keys and values [B, heads, S, "
              "d], found ",
              q_in.sizes(), ", ", key_in.sizes(), " and ", value_in.sizes());
  TORCH_CHECK(q_in.size(0) == key_in.size(0) && q_in.size(1) == key_in.size(1) &&
                  q_in.size(3) == key_in.size(3),
              "attend_few_queries: queries ", q_in.sizes(), " do not match keys ", key_in.sizes());
  for (const at::Tensor* t : {&q_in, &key_in, &value_in})
    TORCH_CHECK(t->is_cpu() && t->scalar_type() == at::kFloat,
                "attend_few_queries: expected float32 CPU tensors, found ", t->scalar_type(),
                " on ", t->device());
  const at::Tensor q = last_dim_contiguous(q_in);
  const at::Tensor key = last_dim_contiguous(key_in);
  const at::Tensor value = last_dim_contiguous(value_in);
  const int64_t batch = q.size(0), heads = q.size(1), queries = q.size(2), d = q.size(3);
  const int64_t keys = key.size(2);
  at::Tensor mask;
  if (mask_in.defined()) {
    TORCH_CHECK(mask_in.scalar_type() == at::kBool && mask_in.is_cpu(),
                "attend_few_queries: expected a boolean CPU mask, found ", mask_in.scalar_type());
    mask = mask_in.expand({batch, heads, queries, keys});
  }
  at::Tensor out = at::empty({batch, queries, heads * d}, q.options());
  if (out.numel() == 0) return out;
  if (keys == 0) return out.fill_(std::numeric_limits<float>::quiet_NaN());

  const float* q_data = q.const_data_ptr<float>();
  const float* key_data = key.const_data_ptr<float>();
  const float* value_data = value.const_data_ptr<float>();
  const bool* mask_data = mask.defined() ? mask.const_data_ptr<bool>() : nullptr;
  float* out_data = out.mutable_data_ptr<float>();
  // Split rows and heads among threads in pieces of at least ~32k multiplications.
  const int64_t work = std::max<int64_t>(1, 2 * queries * keys * d);
  const int64_t grain = std::max<int64_t>(1, 32768 / work);
  const auto head = [&](int64_t bh, float* scores) {
    const int64_t b = bh / heads, h = bh % heads;
    HeadArgs a{};
    a.q = q_data + b * q.stride(0) + h * q.stride(1);
    a.q_stride = q.stride(2);
    a.key = key_data + b * key.stride(0) + h * key.stride(1);
    a.key_stride = key.stride(2);
    a.value = value_data + b * value.stride(0) + h * value.stride(1);
    a.value_stride = value.stride(2);
    if (mask_data) {
      a.mask = mask_data + b * mask.stride(0) + h * mask.stride(1);
      a.mask_query_stride = mask.stride(2);
      a.mask_key_stride = mask.stride(3);
    }
    a.queries = queries;
    a.keys = keys;
    a.d_head = d;
    a.scale = static_cast<float>(scale);
    a.out = out_data + b * queries * heads * d + h * d;
    a.out_stride = heads * d;
    a.scores = scores;
    return a;
  };
  const HeadKernels kernels = kernels_for(lanes);
  at::parallel_for(0, batch * heads, grain, [&](int64_t begin, int64_t end) {
    // Every head's weights, then every head's context: one pass over the keys, then one over
    // the values, as two batched products would read them. Alternating keys and values head
    // by head was 1.2x slower here once the cache outgrew the processor's caches.
    std::vector<float> weights(static_cast<size_t>((end - begin) * queries * keys));
    for (int64_t bh = begin; bh < end; ++bh)
      kernels.weights(head(bh, weights.data() + (bh - begin) * queries * keys));
    for (int64_t bh = begin; bh < end; ++bh)
      kernels.context(head(bh, weights.data() + (bh - begin) * queries * keys));
  });
  return out;
}

}  // namespace nmt::model
