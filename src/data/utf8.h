#pragma once
// UTF-8 validation for corpus lines.

#include <cstddef>
#include <string_view>

namespace nmt::data {

/// Byte offset of the first invalid UTF-8 sequence in text (overlong forms, surrogates and
/// code points above U+10FFFF are invalid), or npos when the text is valid.
size_t find_invalid_utf8(std::string_view text);

}  // namespace nmt::data
