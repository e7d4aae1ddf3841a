#include "util/json.h"

#include "util/utf8.h"

#include <cctype>
#include <cmath>
#include <cstring>

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

}  // namespace nmt::json
