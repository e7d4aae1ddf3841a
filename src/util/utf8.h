#pragma once
// UTF-8 validation, shared by corpus reading (data/) and scoring (eval/).

#include <cstddef>
#include <string_view>

namespace nmt {

/// Length of the valid UTF-8 sequence that starts at text[pos] (1 to 4), or 0 when none does
/// (overlong forms, surrogates and code points above U+10FFFF are invalid).
size_t utf8_sequence_length(std::string_view text, size_t pos);

/// Byte offset of the first invalid UTF-8 sequence in text, or npos when the text is valid.
size_t find_invalid_utf8(std::string_view text);

}  // namespace nmt
