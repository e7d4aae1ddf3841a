#pragma once
// A tensor shape as every message writes it: "[2, 3]" ("[]" for a scalar). A template over
// any range of integers (c10::IntArrayRef, std::vector<int64_t>), so util/ needs no LibTorch.

#include <string>

namespace nmt {

/// "[d0, d1, ...]".
template <class Dims>
std::string shape_string(const Dims& dims) {
  std::string out = "[";
  bool first = true;
  for (const auto dim : dims) {
    if (!first) out += ", ";
    out += std::to_string(dim);
    first = false;
  }
  return out + "]";
}

}  // namespace nmt
