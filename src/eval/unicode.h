#pragma once
// UTF-8 and whitespace helpers that reproduce what Python's str does, since sacreBLEU's
// metrics are defined on Python strings: split() and rstrip() use Unicode whitespace, and
// chrF counts code points, not bytes.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace nmt::eval {

/// Decodes the code point at text[pos] and advances pos past it. An invalid byte decodes to
/// U+DC80 + byte (Python's "surrogateescape"), so invalid input still yields stable n-grams.
uint32_t next_code_point(std::string_view text, size_t& pos);

/// True for the code points Python's str.isspace() accepts (what str.split() splits on):
/// U+0009-000D, U+001C-0020, U+0085, U+00A0, U+1680, U+2000-200A, U+2028, U+2029, U+202F,
/// U+205F, U+3000.
bool is_python_space(uint32_t cp);

/// text without trailing Python whitespace (str.rstrip()).
std::string_view rstrip(std::string_view text);

/// Appends the words of text, split at runs of Python whitespace (str.split()), to words.
/// The views point into text.
void split_words(std::string_view text, std::vector<std::string_view>& words);

}  // namespace nmt::eval
