#include "data/utf8.h"

#include <cstdint>
#include <string_view>

namespace nmt::data {

size_t find_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t length;
    uint32_t code_point;
    if ((c & 0xE0) == 0xC0) {
      length = 2, code_point = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3, code_point = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4, code_point = c & 0x07;
    } else {
      return i;  // a continuation byte or 0xF8..0xFF cannot start a sequence
    }
    if (i + length > n) return i;
    for (size_t k = 1; k < length; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      code_point = (code_point << 6) | (s[i + k] & 0x3F);
    }
    static constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (code_point < kMinForLength[length] || code_point > 0x10FFFF ||
        (code_point >= 0xD800 && code_point <= 0xDFFF))
      return i;
    i += length;
  }
  return std::string_view::npos;
}

}  // namespace nmt::data
