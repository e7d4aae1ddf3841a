#pragma once
// This machine's name, as gethostname() gives it; each caller picks its own fallback (a log
// line says "(unnamed host)", a TensorBoard file name needs a word).

#include <optional>
#include <string>

namespace nmt {

/// gethostname(), or nullopt when it fails or the name is empty.
std::optional<std::string> host_name();

}  // namespace nmt
