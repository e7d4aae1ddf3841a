#include "model/vector_lanes.h"

namespace nmt::model {

bool has_avx512() {
#ifdef NMT_X86_KERNELS
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

bool has_avx2_fma() {
#ifdef NMT_X86_KERNELS
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

int native_vector_lanes() {
  static const int lanes = has_avx512() ? 16 : has_avx2_fma() ? 8 : 4;
  return lanes;
}

int lanes_for(VectorLanes lanes) {
  return lanes == VectorLanes::automatic ? native_vector_lanes() : static_cast<int>(lanes);
}

}  // namespace nmt::model
