#include "util/utf8.h"

#include <cstdint>

namespace nmt {

size_t utf8_sequence_length(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char b0 = byte(pos);
  if (b0 < 0x80) return 1;
  size_t length;
  uint32_t min_code_point;
  if ((b0 & 0xE0) == 0xC0) {
    length = 2, min_code_point = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    length = 3, min_code_point = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    length = 4, min_code_point = 0x10000;
  } else {
    return 0;  // a continuation byte or 0xF8..0xFF cannot start a sequence
  }
  if (pos + length > text.size()) return 0;
  uint32_t code_point = b0 & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return 0;
    code_point = (code_point << 6) | (byte(pos + i) & 0x3F);
  }
  if (code_point < min_code_point || code_point > 0x10FFFF ||
      (code_point >= 0xD800 && code_point <= 0xDFFF))
    return 0;
  return length;
}

size_t find_invalid_utf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const size_t length = utf8_sequence_length(text, pos);
    if (length == 0) return pos;
    pos += length;
  }
  return std::string_view::npos;
}

}  // namespace nmt
