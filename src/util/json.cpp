#include "util/json.h"

#include "util/utf8.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <functional>

#include <fmt/format.h>

namespace nmt::json {
namespace {

// Deep enough for any header shape; shallow enough that hostile input cannot overflow the
// stack of the recursive parser.
constexpr int kMaxDepth = 32;

void append_utf8(std::string& out, uint32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Value parse_document() {
    skip_whitespace();
    Value value = parse_value(0);
    skip_whitespace();
    if (pos_ != text_.size()) fail("end of input");
    return value;
  }

 private:
  [[noreturn]] void fail(std::string_view expected) const {
    if (pos_ >= text_.size())
      throw ParseError(fmt::format("expected {} at byte {}, found the end", expected, pos_));
    const auto c = static_cast<unsigned char>(text_[pos_]);
    const std::string found = c >= 0x20 && c < 0x7F ? fmt::format("'{}'", static_cast<char>(c))
                                                    : fmt::format("byte 0x{:02x}", c);
    throw ParseError(fmt::format("expected {} at byte {}, found {}", expected, pos_, found));
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  void skip_whitespace() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r'))
      ++pos_;
  }

  void expect(char c) {
    if (at_end() || peek() != c) fail(fmt::format("'{}'", c));
    ++pos_;
  }

  Value parse_value(int depth) {
    if (depth >= kMaxDepth) fail(fmt::format("at most {} levels of nesting", kMaxDepth));
    Value value;
    const char c = peek();
    if (c == '{') {
      value.kind = Value::Kind::kObject;
      parse_object(value, depth);
    } else if (c == '[') {
      value.kind = Value::Kind::kArray;
      parse_array(value, depth);
    } else if (c == '"') {
      value.kind = Value::Kind::kString;
      value.string = parse_string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      value.kind = Value::Kind::kInteger;
      value.integer = parse_integer();
    } else {
      fail("an object, array, string or integer");
    }
    return value;
  }

  void parse_object(Value& value, int depth) {
    expect('{');
    skip_whitespace();
    if (peek() == '}') {
      ++pos_;
      return;
    }
    while (true) {
      skip_whitespace();
      const size_t key_pos = pos_;
      if (peek() != '"') fail("a string key");
      std::string key = parse_string();
      for (const auto& member : value.object) {
        if (member.first == key)
          throw ParseError(fmt::format("duplicate key {} at byte {}", quote(key), key_pos));
      }
      skip_whitespace();
      expect(':');
      skip_whitespace();
      Value member = parse_value(depth + 1);
      value.object.emplace_back(std::move(key), std::move(member));
      skip_whitespace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return;
      }
      fail("',' or '}'");
    }
  }

  void parse_array(Value& value, int depth) {
    expect('[');
    skip_whitespace();
    if (peek() == ']') {
      ++pos_;
      return;
    }
    while (true) {
      skip_whitespace();
      value.array.push_back(parse_value(depth + 1));
      skip_whitespace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return;
      }
      fail("',' or ']'");
    }
  }

  int64_t parse_integer() {
    const size_t start = pos_;
    const bool negative = peek() == '-';
    if (negative) ++pos_;
    if (at_end() || peek() < '0' || peek() > '9') fail("a digit");
    if (peek() == '0' && pos_ + 1 < text_.size() && text_[pos_ + 1] >= '0' &&
        text_[pos_ + 1] <= '9') {
      fail("no leading zeros");
    }
    // Accumulate as a negative number: its range holds INT64_MIN.
    int64_t value = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      const int digit = peek() - '0';
      if (value < (INT64_MIN + digit) / 10) {
        pos_ = start;
        fail("an integer within the 64-bit range");
      }
      value = value * 10 - digit;
      ++pos_;
    }
    if (peek() == '.' || peek() == 'e' || peek() == 'E')
      fail("an integer (no fraction or exponent)");
    if (!negative) {
      if (value == INT64_MIN) {
        pos_ = start;
        fail("an integer within the 64-bit range");
      }
      value = -value;
    }
    return value;
  }

  uint32_t parse_hex4() {
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = peek();
      uint32_t digit;
      if (c >= '0' && c <= '9') {
        digit = static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        digit = static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        digit = static_cast<uint32_t>(c - 'A' + 10);
      } else {
        fail("4 hex digits after \\u");
      }
      value = value * 16 + digit;
      ++pos_;
    }
    return value;
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    while (true) {
      if (at_end()) fail("'\"' closing the string");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail("an escaped control character");
      if (c != '\\') {
        // Copy the run of plain bytes at once, then check it is valid UTF-8.
        const size_t begin = pos_;
        while (!at_end() && text_[pos_] != '"' && text_[pos_] != '\\' &&
               static_cast<unsigned char>(text_[pos_]) >= 0x20) {
          ++pos_;
        }
        const std::string_view run = text_.substr(begin, pos_ - begin);
        const size_t bad = find_invalid_utf8(run);
        if (bad != std::string_view::npos) {
          pos_ = begin + bad;
          fail("valid UTF-8");
        }
        out.append(run);
        continue;
      }
      ++pos_;
      const char e = peek();
      if (at_end()) fail("an escape character");
      ++pos_;
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t code_point = parse_hex4();
          if (code_point >= 0xDC00 && code_point <= 0xDFFF) {
            pos_ -= 4;
            fail("a high surrogate before a low surrogate");
          }
          if (code_point >= 0xD800 && code_point <= 0xDBFF) {
            if (peek() != '\\' || pos_ + 1 >= text_.size() || text_[pos_ + 1] != 'u')
              fail("a \\u low surrogate after a high surrogate");
            pos_ += 2;
            const uint32_t low = parse_hex4();
            if (low < 0xDC00 || low > 0xDFFF) {
              pos_ -= 4;
              fail("a low surrogate (DC00-DFFF)");
            }
            code_point = 0x10000 + ((code_point - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, code_point);
          break;
        }
        default:
          pos_ -= 1;
          fail("one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u");
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

Value parse(std::string_view text) { return Parser(text).parse_document(); }

const char* kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::kObject:
      return "object";
    case Value::Kind::kArray:
      return "array";
    case Value::Kind::kString:
      return "string";
    case Value::Kind::kInteger:
      return "integer";
  }
  return "value";
}


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

/// Collects the numbers of JSON text that Object wrote (valid by construction; anything else
/// is a ParseError all the same).
class NumberWalker {
 public:
  NumberWalker(std::string_view text, std::vector<std::pair<std::string, double>>& out)
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
      out_.emplace_back(path, std::stod(std::string(text_.substr(start, pos_ - start))));
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
  std::vector<std::pair<std::string, double>>& out_;
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
  for (const auto& [key, value] : members_) {
    std::vector<std::pair<std::string, double>> found;
    NumberWalker(value, found).value("");
    for (auto& [path, number] : found) out.emplace_back(key + path, number);
  }
  return out;
}

}  // namespace nmt::json
