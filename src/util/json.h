#pragma once
// JSON, the one reader and writer of the project.
//
// Reading: the small, strict subset of a safetensors header (objects, arrays, strings with
// every escape, \uXXXX and surrogate pairs included, and integers). Written here rather than
// taken from a library because the header shape is fixed and tiny, and a checkpoint must
// never need more than that to be read.
//
// Writing: Object builds one object in insertion order for the files that scripts read
// (metrics.jsonl, summary.json, benchmark.json, batch_stats.json, nmt-ckpt and nmt-score
// output). Non-finite numbers are written as null, since JSON has no NaN.

#include <cstddef>
#include <optional>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nmt::json {

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

/// A number as JSON: the shortest text that reads back as the same double; null when not
/// finite.
std::string number(double value);

/// One JSON object, its members in the order they were added.
///   json::Object o;  o.add("step", 12).add("loss", 2.5).add("note", "ok");
///   o.str()  ->  {"step": 12, "loss": 2.5, "note": "ok"}
class Object {
 public:
  Object& add(std::string_view key, double value);
  Object& add(std::string_view key, int64_t value);
  Object& add(std::string_view key, int value) { return add(key, int64_t{value}); }
  Object& add(std::string_view key, bool value);
  Object& add(std::string_view key, std::string_view text);  ///< a string, quoted
  Object& add(std::string_view key, const char* text) { return add(key, std::string_view(text)); }
  Object& add(std::string_view key, const std::string& text) { return add(key, std::string_view(text)); }
  Object& add(std::string_view key, const Object& object);
  Object& add(std::string_view key, const std::vector<double>& values);
  Object& add(std::string_view key, const std::vector<std::string>& strings);
  Object& add(std::string_view key, const std::vector<Object>& objects);
  /// The value, or null when absent.
  template <class T>
  Object& add(std::string_view key, const std::optional<T>& value) {
    return value ? add(key, *value) : add_raw(key, "null");
  }
  /// Adds text that already is JSON.
  Object& add_raw(std::string_view key, std::string_view json);
  /// The JSON text of the member `key` (the first of that name), or nullopt when absent.
  std::optional<std::string_view> member(std::string_view key) const;
  /// True when nothing was added.
  bool empty() const { return members_.empty(); }
  /// One line: {"a": 1, "b": [1, 2]}.
  std::string str() const;
  /// Indented by two spaces per level, one member per line, ending with a newline.
  std::string pretty() const;
  /// Every number in the object with its path, in order: a member's key, and below it the
  /// keys of nested objects and the indexes of arrays, joined by '/' ({"a": {"b": [1, 2]}}
  /// gives a/b/0 = 1, a/b/1 = 2). Strings, booleans and null are left out.
  std::vector<std::pair<std::string, double>> numbers() const;

 private:
  std::vector<std::pair<std::string, std::string>> members_;  ///< key, value JSON (one line)
  std::vector<std::pair<size_t, Object>> nested_;             ///< members that are objects
};

/// Every number in one JSON value's text with its path (as Object::numbers gives them below
/// a member: {"a": {"b": [1, 2.5]}} gives /a/b/0 = "1", /a/b/1 = "2.5") and its text as
/// written, so that a caller can tell an integer from a real. Malformed text is a ParseError.
std::vector<std::pair<std::string, std::string_view>> number_texts(std::string_view text);

}  // namespace nmt::json
