#pragma once
// The small, strict JSON subset of a safetensors header: objects, arrays, strings (with every
// escape, \uXXXX and surrogate pairs included) and integers. Written here rather than taken
// from a library because the header shape is fixed and tiny, and a checkpoint must never
// need more than that to be read.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nmt::checkpoint::json {

/// Malformed JSON; what() says what was expected and at which byte offset.
class ParseError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One parsed JSON value of the supported subset.
struct Value {
  /// Which member holds the value.
  enum class Kind { kObject, kArray, kString, kInteger };
  Kind kind = Kind::kInteger;                         ///< type of the value
  int64_t integer = 0;                                ///< kInteger
  std::string string;                                 ///< kString (UTF-8)
  std::vector<Value> array;                           ///< kArray
  std::vector<std::pair<std::string, Value>> object;  ///< kObject, in document order
};

/// Parses one JSON value (surrounding whitespace allowed). Duplicate object keys, numbers that
/// are not integers in int64 range, true/false/null, invalid UTF-8 and nesting deeper than
/// 32 levels are errors.
Value parse(std::string_view text);

/// Name of a kind for messages ("object", "array", "string", "integer").
const char* kind_name(Value::Kind kind);

/// Appends text as a quoted JSON string: quote, backslash and control characters escaped,
/// everything else (UTF-8 included) as is.
void append_string(std::string& out, std::string_view text);

/// text as a quoted JSON string (see append_string).
std::string quote(std::string_view text);

}  // namespace nmt::checkpoint::json
