// json::Object (writing JSON one member at a time) and walking the numbers of JSON text;
// the parser is json.cpp.
#include "util/json.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <functional>

#include <fmt/format.h>

namespace nmt::json {

void append_string(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

std::string quote(std::string_view text) {
  std::string out;
  append_string(out, text);
  return out;
}

std::string number(double value) {
  return std::isfinite(value) ? fmt::format("{}", value) : std::string("null");
}

Object& Object::add(std::string_view key, double value) { return add_raw(key, number(value)); }
Object& Object::add(std::string_view key, int64_t value) {
  return add_raw(key, fmt::format("{}", value));
}
Object& Object::add(std::string_view key, bool value) { return add_raw(key, value ? "true" : "false"); }
Object& Object::add(std::string_view key, std::string_view text) { return add_raw(key, quote(text)); }
Object& Object::add(std::string_view key, const Object& object) {
  nested_.emplace_back(members_.size(), object);
  return add_raw(key, object.str());
}
Object& Object::add(std::string_view key, const std::vector<double>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + number(values[i]);
  return add_raw(key, out + "]");
}
Object& Object::add(std::string_view key, const std::vector<std::string>& strings) {
  std::string out = "[";
  for (size_t i = 0; i < strings.size(); ++i) out += (i ? ", " : "") + quote(strings[i]);
  return add_raw(key, out + "]");
}
Object& Object::add(std::string_view key, const std::vector<Object>& objects) {
  std::string out = "[";
  for (size_t i = 0; i < objects.size(); ++i) out += (i ? ", " : "") + objects[i].str();
  return add_raw(key, out + "]");
}
Object& Object::add_raw(std::string_view key, std::string_view json) {
  members_.emplace_back(std::string(key), std::string(json));
  return *this;
}

std::string Object::str() const {
  std::string out = "{";
  for (size_t i = 0; i < members_.size(); ++i)
    out += (i ? ", " : "") + quote(members_[i].first) + ": " + members_[i].second;
  return out + "}";
}

std::string Object::pretty() const {
  // Nested objects are indented in turn; everything else stays on its member's line.
  const std::function<std::string(const Object&, const std::string&)> format =
      [&format](const Object& o, const std::string& indent) {
        if (o.members_.empty()) return std::string("{}");
        std::string out = "{\n";
        for (size_t i = 0; i < o.members_.size(); ++i) {
          std::string value = o.members_[i].second;
          for (const auto& [index, nested] : o.nested_)
            if (index == i) value = format(nested, indent + "  ");
          out += indent + "  " + quote(o.members_[i].first) + ": " + value +
                 (i + 1 < o.members_.size() ? ",\n" : "\n");
        }
        return out + indent + "}";
      };
  return format(*this, "") + "\n";
}

namespace {

/// Collects the numbers of JSON text, each with its path and its text as written (valid JSON
/// is walked, anything else is a ParseError, though not every error is detected).
class NumberWalker {
 public:
  NumberWalker(std::string_view text, std::vector<std::pair<std::string, std::string_view>>& out)
      : text_(text), out_(out) {}

  void value(const std::string& path) {
    skip_space();
    const char c = peek();
    if (c == '{') {
      ++pos_;
      for (bool first = true;; first = false) {
        skip_space();
        if (peek() == '}' && first) break;
        const std::string key = string();
        skip_space();
        expect(':');
        value(path + "/" + key);
        skip_space();
        if (peek() != ',') break;
        ++pos_;
      }
      expect('}');
    } else if (c == '[') {
      ++pos_;
      skip_space();
      for (size_t i = 0; peek() != ']'; ++i) {
        value(path + "/" + std::to_string(i));
        skip_space();
        if (peek() != ',') break;
        ++pos_;
      }
      expect(']');
    } else if (c == '"') {
      string();
    } else if (c == 't' || c == 'f' || c == 'n') {
      while (pos_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    } else {
      const size_t start = pos_;
      while (pos_ < text_.size() && std::strchr("+-.0123456789eE", text_[pos_]) != nullptr) ++pos_;
      if (pos_ == start) throw ParseError(fmt::format("expected a JSON value at byte {}", start));
      out_.emplace_back(path, text_.substr(start, pos_ - start));
    }
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  void expect(char c) {
    if (peek() != c) throw ParseError(fmt::format("expected '{}' at byte {}", c, pos_));
    ++pos_;
  }
  /// A string's characters, an escaped one kept as the character after the backslash (enough
  /// for the keys of a path).
  std::string string() {
    expect('"');
    std::string out;
    while (peek() != '"') {
      if (peek() == '\\') ++pos_;
      if (pos_ >= text_.size()) throw ParseError("unterminated JSON string");
      out += text_[pos_++];
    }
    ++pos_;
    return out;
  }

  std::string_view text_;
  std::vector<std::pair<std::string, std::string_view>>& out_;
  size_t pos_ = 0;
};

}  // namespace

std::optional<std::string_view> Object::member(std::string_view key) const {
  for (const auto& [name, value] : members_)
    if (name == key) return std::string_view(value);
  return std::nullopt;
}

std::vector<std::pair<std::string, double>> Object::numbers() const {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [key, value] : members_)
    for (const auto& [path, text] : number_texts(value))
      out.emplace_back(key + path, std::stod(std::string(text)));
  return out;
}

std::vector<std::pair<std::string, std::string_view>> number_texts(std::string_view text) {
  std::vector<std::pair<std::string, std::string_view>> out;
  NumberWalker(text, out).value("");
  return out;
}

}  // namespace nmt::json
