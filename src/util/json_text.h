#pragma once
// The project's JSON text, written from nlohmann::ordered_json (nlohmann-json reads and builds
// every JSON value here).
//
// Written by hand, a few dozen lines, because nlohmann's dump() cannot give the bytes of the
// files that scripts and tests read: metrics.jsonl, summary.json, benchmark.json and
// the other run files separate members with ", " and ": ", write a double as the shortest text
// that reads back as it (2.0 as 2, as Python does not), write non-finite numbers as null (JSON
// has no NaN; dump() would too, but with its own number text) and keep arrays on one line when
// indented. Strings are escaped by nlohmann (\" \\ \b \f \n \r \t and
// \u00XX for other control characters, UTF-8 as is; invalid UTF-8 becomes U+FFFD).

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace nmt::json {

/// One line: {"step": 12, "loss": 2.5, "peaks": [1.5, 2], "fit": {"oom": true}}.
std::string line(const nlohmann::ordered_json& value);

/// An object indented by two spaces per level, one member per line, ending with a newline.
/// Objects that are members of objects are indented in turn down to `levels` levels (the top
/// object is level 1); deeper objects, arrays and the objects in arrays stay on one line.
std::string pretty(const nlohmann::ordered_json& value, int levels = 1 << 30);

/// The value, or null when absent (nlohmann-json 3.11 does not convert std::optional).
template <class T>
nlohmann::ordered_json or_null(const std::optional<T>& value) {
  return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json();
}

/// text as a quoted JSON string (for messages and hand-written JSON lines).
std::string quote(std::string_view text);

}  // namespace nmt::json
