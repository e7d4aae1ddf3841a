#include "model/few_query_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
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

/// exp(x) for x <= 0 (scores less their maximum), 0 below -87 and for -inf: Cephes' expf
/// (a degree-6 polynomial after a two-part reduction by ln 2, within 2 units in the last
/// place), written without calls or branches so that it vectorizes inside head_weights (libm's
/// expf is a call per score, which was a third of the kernel's time).
inline float exp_nonpositive(float x) {
  const float clamped = x < -87.0f ? -87.0f : x;
  // Round to nearest by adding 1.5 * 2^23: vectorizes without SSE4.1's round.
  constexpr float kRound = 12582912.0f;
  const float n = (clamped * 1.44269504088896341f + kRound) - kRound;
  float r = clamped - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const auto bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float two_to_n;
  std::memcpy(&two_to_n, &bits, sizeof two_to_n);
  return x < -87.0f ? 0.0f : y * two_to_n;
}

/// 16 floats as one value: GCC's vector extension, compiled to one AVX-512 register, two AVX2
/// ones or four SSE ones depending on the clone (below). Written out, the kernel's sums need no
/// reassociation from the compiler (which it may not do without -ffast-math), and a horizontal
/// sum is a few shuffles instead of a chain of 16 scalar additions.
// The helpers taking and returning these are inlined into the clones, never called across an
// ABI boundary, so GCC's note that such a call would pass them differently without AVX-512 does
// not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float Vec16 __attribute__((vector_size(64)));
typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec4 __attribute__((vector_size(16)));
constexpr int64_t kLanes = 16;

__attribute__((always_inline)) inline Vec16 load16(const float* p) {
  Vec16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

__attribute__((always_inline)) inline void store16(float* p, Vec16 v) {
  std::memcpy(p, &v, sizeof v);
}

/// The sum of v's lanes by halving: (8 + 8), (4 + 4), then the last four.
__attribute__((always_inline)) inline float sum_lanes(Vec16 v) {
  const Vec8 eight = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                     __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const Vec4 four = __builtin_shufflevector(eight, eight, 0, 1, 2, 3) +
                    __builtin_shufflevector(eight, eight, 4, 5, 6, 7);
  return (four[0] + four[2]) + (four[1] + four[3]);
}

/// The dot product of x and y, n floats each.
__attribute__((always_inline)) inline float dot(const float* x, const float* y, int64_t n) {
  Vec16 partial = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) partial += load16(x + i) * load16(y + i);
  float sum = sum_lanes(partial);
  for (; i < n; ++i) sum += x[i] * y[i];
  return sum;
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define NMT_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define NMT_VECTOR_CLONES
#endif

/// One row and head, first half: each query's attention weights (softmax of its scores) into
/// a.scores, queries a.keys apart; a query with nothing to attend to gets NaN weights. Compiled
/// for AVX-512 and AVX2 besides the baseline, picked at load time (GCC function
/// multi-versioning).
NMT_VECTOR_CLONES
void head_weights(const HeadArgs& a) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  // Key by key, every query: a key is read from memory once for all of a row's queries.
  for (int64_t s = 0; s < a.keys; ++s) {
    const float* k = a.key + s * a.key_stride;
    for (int64_t qi = 0; qi < a.queries; ++qi)
      a.scores[qi * a.keys + s] = dot(a.q + qi * a.q_stride, k, a.d_head) * a.scale;
  }
  for (int64_t qi = 0; qi < a.queries; ++qi) {
    float* scores = a.scores + qi * a.keys;
    if (a.mask) {
      const bool* mask = a.mask + qi * a.mask_query_stride;
      for (int64_t s = 0; s < a.keys; ++s)
        if (!mask[s * a.mask_key_stride]) scores[s] = neg_inf;
    }
    float max = neg_inf;
    for (int64_t s = 0; s < a.keys; ++s) max = std::max(max, scores[s]);
    if (max == neg_inf) {  // nothing to attend to
      std::fill(scores, scores + a.keys, std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    for (int64_t s = 0; s < a.keys; ++s) scores[s] = exp_nonpositive(scores[s] - max);
    Vec16 partial = {};
    int64_t s = 0;
    for (; s + kLanes <= a.keys; s += kLanes) partial += load16(scores + s);
    float sum = sum_lanes(partial);
    for (; s < a.keys; ++s) sum += scores[s];
    const float norm = 1.0f / sum;
    for (s = 0; s < a.keys; ++s) scores[s] *= norm;
  }
}

/// One row and head, second half: each query's context, the sum of values by the weights in
/// a.scores. Masked keys weigh 0 and are skipped, so that a NaN or infinite value there has no
/// effect; NaN weights make a NaN context. Each 16 columns of the context stay in a register
/// while the values are summed into them.
NMT_VECTOR_CLONES
void head_context(const HeadArgs& a) {
  const int64_t d = a.d_head;
  for (int64_t qi = 0; qi < a.queries; ++qi) {
    const float* weights = a.scores + qi * a.keys;
    float* out = a.out + qi * a.out_stride;
    int64_t i = 0;
    for (; i + kLanes <= d; i += kLanes) {
      Vec16 sum = {};
      for (int64_t s = 0; s < a.keys; ++s)
        if (weights[s] != 0.0f) sum += weights[s] * load16(a.value + s * a.value_stride + i);
      store16(out + i, sum);
    }
    for (; i < d; ++i) {
      float sum = 0.0f;
      for (int64_t s = 0; s < a.keys; ++s)
        if (weights[s] != 0.0f) sum += weights[s] * a.value[s * a.value_stride + i];
      out[i] = sum;
    }
  }
}

/// t with its last dimension contiguous (a copy only where it is not).
at::Tensor last_dim_contiguous(const at::Tensor& t) {
  return t.stride(-1) == 1 || t.size(-1) == 1 ? t : t.contiguous();
}

}  // namespace

at::Tensor attend_few_queries(const at::Tensor& q_in, const at::Tensor& key_in,
                              const at::Tensor& value_in, const at::Tensor& mask_in, double scale) {
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
  at::parallel_for(0, batch * heads, grain, [&](int64_t begin, int64_t end) {
    // Every head's weights, then every head's context: one pass over the keys, then one over
    // the values, as two batched products would read them. Alternating keys and values head
    // by head was 1.2x slower here once the cache outgrew the processor's caches.
    std::vector<float> weights(static_cast<size_t>((end - begin) * queries * keys));
    for (int64_t bh = begin; bh < end; ++bh)
      head_weights(head(bh, weights.data() + (bh - begin) * queries * keys));
    for (int64_t bh = begin; bh < end; ++bh)
      head_context(head(bh, weights.data() + (bh - begin) * queries * keys));
  });
  return out;
}

}  // namespace nmt::model
