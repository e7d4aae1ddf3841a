#include "util/cpu_features.h"

#include <fstream>
#include <iterator>
#include <sstream>

namespace nmt {
namespace {

/// The value of the first "key : value" line, or nothing.
bool field(std::string_view cpuinfo, std::string_view key, std::string* value) {
  std::istringstream lines{std::string(cpuinfo)};
  for (std::string line; std::getline(lines, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.pop_back();
    if (name != key) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    *value = start == std::string::npos ? std::string() : line.substr(start);
    return true;
  }
  return false;
}

}  // namespace

CpuFeatures parse_cpu_features(std::string_view cpuinfo) {
  CpuFeatures out;
  std::string flags;
  out.known = field(cpuinfo, "flags", &flags);
  field(cpuinfo, "model name", &out.model_name);
  std::istringstream words(flags);
  for (std::string flag; words >> flag;) {
    if (flag == "avx512f") out.avx512f = true;
    else if (flag == "avx512_bf16") out.avx512_bf16 = true;
    else if (flag == "amx_bf16") out.amx_bf16 = true;
  }
  return out;
}

CpuFeatures detect_cpu_features() {
  std::ifstream in("/proc/cpuinfo");
  if (!in) return {};
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_cpu_features(text);
}

}  // namespace nmt
