#pragma once
// Vector code of the CPU kernels (the few-query attention, the log-softmax of decoding steps):
// a value of W floats in GCC's vector extension, its loads and stores, sums and maxima of its
// lanes, and a branch-free exp that vectorizes. A kernel is written once as a template over W
// and instantiated in functions compiled for the instruction set whose registers hold W floats
// (4: SSE, the x86-64 baseline; 8: AVX2 with FMA; 16: AVX-512), picked at run time by
// native_vector_lanes(). Written out, a kernel's sums need no reassociation from the compiler
// (which it may not do without -ffast-math).
//
// Only for the kernels' own .cpp files: the templates here are inlined into each per-ISA entry
// point, never called across an ABI boundary, so GCC's -Wpsabi note (that such a call would pass
// these values differently without AVX or AVX-512) does not apply: it is silenced for the
// templates below.

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace nmt::model {

/// The vector width of a CPU kernel. automatic: the widest this processor runs natively (16
/// lanes with AVX-512, 8 with AVX2 and FMA, else 4). A width asked for runs on any processor,
/// compiled for the best instruction set it has there (tests run every width).
enum class VectorLanes { automatic = 0, four = 4, eight = 8, sixteen = 16 };

/// The width that VectorLanes::automatic picks here: 4, 8 or 16.
int native_vector_lanes();

/// Whether this processor runs the 8-lane (AVX2 and FMA) and 16-lane (AVX-512F) instantiations
/// natively; false where the build has no such instantiations (not GCC on x86-64).
bool has_avx2_fma();
bool has_avx512();

/// The width that lanes stands for here (automatic: native_vector_lanes()).
int lanes_for(VectorLanes lanes);

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
/// Defined where kernels have per-ISA instantiations (GCC's target attribute on x86-64).
#define NMT_X86_KERNELS 1
#endif

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
namespace lanes {

template <int W>
struct Lanes {
  typedef float Vec __attribute__((vector_size(W * sizeof(float))));
};

template <typename Vec>
__attribute__((always_inline)) inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename Vec>
__attribute__((always_inline)) inline void store(float* p, Vec v) {
  std::memcpy(p, &v, sizeof v);
}

/// A vector of W copies of x.
template <int W>
__attribute__((always_inline)) inline typename Lanes<W>::Vec broadcast(float x) {
  typename Lanes<W>::Vec v;
  for (int j = 0; j < W; ++j) v[j] = x;
  return v;
}

/// The sum of v's lanes.
template <int W>
__attribute__((always_inline)) inline float lane_sum(typename Lanes<W>::Vec v) {
  float sum = 0.0f;
  for (int j = 0; j < W; ++j) sum += v[j];
  return sum;
}

/// The largest of v's lanes.
template <int W>
__attribute__((always_inline)) inline float lane_max(typename Lanes<W>::Vec v) {
  float max = v[0];
  for (int j = 1; j < W; ++j) max = std::max(max, v[j]);
  return max;
}

/// The shared body of both exp_nonpositive: for n = round(x / ln 2) (x already clamped to
/// -87), exp(x) / 2^n by the two-part reduction and the polynomial. T is float or a vector.
template <typename T>
__attribute__((always_inline)) inline T exp_reduced(T clamped, T n) {
  T r = clamped - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  T p = T{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r + r + 1.0f;
}

/// exp(x) for x <= 0 (scores less their maximum), 0 below -87 and for -inf, NaN for NaN:
/// Cephes' expf (a degree-6 polynomial after a two-part reduction by ln 2, within 2 units in the
/// last place), written without calls or branches so that it vectorizes in a kernel's loops
/// (libm's expf is a call per number, which was a third of the attention kernel's time).
inline float exp_nonpositive(float x) {
  const float clamped = x < -87.0f ? -87.0f : x;
  // Round to nearest by adding 1.5 * 2^23: vectorizes without SSE4.1's round.
  constexpr float kRound = 12582912.0f;
  const float n = (clamped * 1.44269504088896341f + kRound) - kRound;
  const float y = exp_reduced(clamped, n);
  const auto bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float two_to_n;
  std::memcpy(&two_to_n, &bits, sizeof two_to_n);
  return x < -87.0f ? 0.0f : y * two_to_n;
}

/// exp_nonpositive of each lane, in vector operations (a loop over lanes calling the scalar one
/// is not vectorized by GCC).
template <int W>
__attribute__((always_inline)) inline typename Lanes<W>::Vec exp_nonpositive(
    typename Lanes<W>::Vec x) {
  using Vec = typename Lanes<W>::Vec;
  typedef int32_t Ints __attribute__((vector_size(W * sizeof(int32_t))));
  const Vec low = broadcast<W>(-87.0f);
  const Vec clamped = x < low ? low : x;
  const Vec round = broadcast<W>(12582912.0f);
  const Vec n = (clamped * 1.44269504088896341f + round) - round;
  const Vec y = exp_reduced(clamped, n);
  const Ints bits = (__builtin_convertvector(n, Ints) + 127) << 23;
  Vec two_to_n;
  std::memcpy(&two_to_n, &bits, sizeof two_to_n);
  return x < low ? Vec{} : y * two_to_n;
}

}  // namespace lanes
#pragma GCC diagnostic pop
}  // namespace nmt::model
