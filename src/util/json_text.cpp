#include "util/json_text.h"

#include <cmath>

#include <fmt/format.h>

namespace nmt::json {
namespace {

using Json = nlohmann::ordered_json;

/// A scalar's text: a double as its shortest round-trip text or null; the rest as nlohmann
/// writes it.
std::string scalar(const Json& value) {
  if (value.is_number_float()) {
    const double v = value.get<double>();
    return std::isfinite(v) ? fmt::format("{}", v) : std::string("null");
  }
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void append_line(std::string& out, const Json& value) {
  if (value.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, member] : value.items()) {
      if (!first) out += ", ";
      first = false;
      out += quote(key) + ": ";
      append_line(out, member);
    }
    out += '}';
  } else if (value.is_array()) {
    out += '[';
    for (size_t i = 0; i < value.size(); ++i) {
      if (i) out += ", ";
      append_line(out, value[i]);
    }
    out += ']';
  } else {
    out += scalar(value);
  }
}

void append_pretty(std::string& out, const Json& value, const std::string& indent, int levels) {
  if (!value.is_object() || value.empty() || levels <= 0) return append_line(out, value);
  out += "{\n";
  size_t i = 0;
  for (const auto& [key, member] : value.items()) {
    out += indent + "  " + quote(key) + ": ";
    append_pretty(out, member, indent + "  ", levels - 1);
    out += ++i < value.size() ? ",\n" : "\n";
  }
  out += indent + "}";
}

}  // namespace

std::string line(const Json& value) {
  std::string out;
  append_line(out, value);
  return out;
}

std::string pretty(const Json& value, int levels) {
  std::string out;
  append_pretty(out, value, "", levels);
  return out + "\n";
}

std::string quote(std::string_view text) {
  return Json(std::string(text)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace nmt::json
