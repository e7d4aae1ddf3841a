#include "eval/unicode.h"

#include "util/utf8.h"

namespace nmt::eval {
uint32_t next_code_point(std::string_view text, size_t& pos) {
  const unsigned char b0 = static_cast<unsigned char>(text[pos]);
  if (b0 < 0x80) {
    ++pos;
    return b0;
  }
  const size_t len = utf8_sequence_length(text, pos);
  if (len == 0) {
    ++pos;
    return 0xDC00 + b0;  // surrogateescape: b0 >= 0x80 here
  }
  uint32_t cp = b0 & (0x7F >> len);
  for (size_t i = 1; i < len; ++i)
    cp = (cp << 6) | (static_cast<unsigned char>(text[pos + i]) & 0x3F);
  pos += len;
  return cp;
}

bool is_python_space(uint32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::string_view rstrip(std::string_view text) {
  size_t end = 0;  // end of the last non-space code point
  size_t pos = 0;
  while (pos < text.size()) {
    if (!is_python_space(next_code_point(text, pos))) end = pos;
  }
  return text.substr(0, end);
}

void split_words(std::string_view text, std::vector<std::string_view>& words) {
  size_t pos = 0;
  size_t start = std::string_view::npos;  // start of the current word
  while (pos < text.size()) {
    const size_t here = pos;
    const unsigned char b = static_cast<unsigned char>(text[pos]);
    // ASCII fast path; only non-ASCII needs decoding to test for Unicode spaces.
    const bool space = b < 0x80 ? is_python_space(b) : is_python_space(next_code_point(text, pos));
    if (b < 0x80) ++pos;
    if (space) {
      if (start != std::string_view::npos) words.push_back(text.substr(start, here - start));
      start = std::string_view::npos;
    } else if (start == std::string_view::npos) {
      start = here;
    }
  }
  if (start != std::string_view::npos) words.push_back(text.substr(start));
}

}  // namespace nmt::eval
