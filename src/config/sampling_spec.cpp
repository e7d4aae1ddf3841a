#include "config/sampling_spec.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "util/error.h"

namespace nmt::config {
namespace {

constexpr const char* kForms = "expected topk:K, temperature:T or topk:K,temperature:T";

/// The whole of `text` as an integer, or false.
bool parse_integer(const std::string& text, long long* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  *out = std::strtoll(text.c_str(), &end, 10);
  return errno == 0 && *end == '\0';
}

/// The whole of `text` as a number, or false.
bool parse_number(const std::string& text, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  *out = std::strtod(text.c_str(), &end);
  return errno == 0 && *end == '\0';
}

}  // namespace

decode::SamplingOptions parse_sampling_spec(const std::string& spec) {
  decode::SamplingOptions o;
  bool has_topk = false, has_temperature = false;
  std::istringstream parts(spec);
  std::string part;
  NMT_CHECK(!spec.empty(), ConfigError, "--sampling: empty value; {}", kForms);
  while (std::getline(parts, part, ',')) {
    const size_t colon = part.find(':');
    const std::string method = part.substr(0, colon);
    const std::string value = colon == std::string::npos ? "" : part.substr(colon + 1);
    if (method == "topk") {
      NMT_CHECK(!has_topk, ConfigError, "--sampling {}: topk given twice", spec);
      long long k = 0;
      NMT_CHECK(parse_integer(value, &k) && k >= 1, ConfigError,
                "--sampling {}: topk:K expects an integer K >= 1, found '{}'", spec, value);
      o.top_k = k;
      has_topk = true;
    } else if (method == "temperature") {
      NMT_CHECK(!has_temperature, ConfigError, "--sampling {}: temperature given twice", spec);
      double t = 0;
      NMT_CHECK(parse_number(value, &t) && t >= decode::kMinSamplingTemperature &&
                    t <= decode::kMaxSamplingTemperature,
                ConfigError,
                "--sampling {}: temperature:T expects a number T in [{}, {}] (below it, use "
                "topk:1 for greedy search), found '{}'",
                spec, decode::kMinSamplingTemperature, decode::kMaxSamplingTemperature, value);
      o.temperature = t;
      has_temperature = true;
    } else {
      NMT_THROW(ConfigError, "--sampling {}: unknown sampling '{}'; {}", spec, part, kForms);
    }
  }
  NMT_CHECK(spec.back() != ',', ConfigError, "--sampling {}: trailing comma; {}", spec, kForms);
  return o;
}

}  // namespace nmt::config
