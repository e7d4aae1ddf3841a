#pragma once
// The JSON of a safetensors header: parsed by nlohmann-json, with the checks a checkpoint
// reader adds on top (a parser callback, so that nothing refused is ever built).

#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>

namespace nmt::checkpoint {

/// A header that is not JSON of the accepted shape; what() says what is wrong.
class HeaderJsonError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Deepest nesting of objects and arrays a header may have (a safetensors header has 3).
inline constexpr int kMaxHeaderDepth = 32;

/// Parses a header's JSON (whitespace around it allowed), objects in document order. Beyond
/// JSON itself (valid UTF-8, nothing after the value), refuses what a safetensors header never
/// holds: duplicate keys in an object (two readers could see two different tensors), numbers
/// that are not integers in the int64 range, true, false, null, and more than kMaxHeaderDepth
/// levels of nesting. Throws HeaderJsonError.
nlohmann::ordered_json parse_header_json(std::string_view text);

}  // namespace nmt::checkpoint
