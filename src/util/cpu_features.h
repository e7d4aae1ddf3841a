#pragma once
// The CPU's instruction-set extensions that choose a precision (amp.mode auto): read from the
// "flags" line of /proc/cpuinfo, which names what both the CPU and the kernel support (AMX
// needs the kernel's consent to its tile state, and the kernel lists it only then).

#include <string>
#include <string_view>

namespace nmt {

/// What the CPU offers for low-precision matrix products.
struct CpuFeatures {
  bool known = false;        ///< false: no flags line was found (not Linux, or no /proc)
  bool avx512f = false;      ///< AVX-512 Foundation
  bool avx512_bf16 = false;  ///< AVX512-BF16: bf16 dot products in AVX-512 registers
  bool amx_bf16 = false;     ///< AMX-BF16: bf16 tile matrix multiply (Sapphire Rapids and later)
  std::string model_name;    ///< "model name" of the first processor, for messages
};

/// The features named by the first "flags" line of a /proc/cpuinfo text.
CpuFeatures parse_cpu_features(std::string_view cpuinfo);

/// This machine's features (/proc/cpuinfo); known = false where it cannot be read.
CpuFeatures detect_cpu_features();

}  // namespace nmt
