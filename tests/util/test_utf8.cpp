
#include <catch2/catch.hpp>

#include "util/utf8.h"

using nmt::find_invalid_utf8;
constexpr size_t kValid = std::string_view::npos;

TEST_CASE("UTF-8 validation accepts valid text and finds the first bad byte", "[util]") {
  CHECK(find_invalid_utf8("") == kValid);
  CHECK(find_invalid_utf8("plain ASCII") == kValid);
  CHECK(find_invalid_utf8("Grüße, 日本語, 😀") == kValid);
  CHECK(find_invalid_utf8("ab\xff") == 2);              // byte that never starts a sequence
  CHECK(find_invalid_utf8("a\xc3") == 1);               // truncated sequence
  CHECK(find_invalid_utf8("a\xc3(") == 1);              // bad continuation byte
  CHECK(find_invalid_utf8("\xc0\xaf") == 0);            // overlong "/"
  CHECK(find_invalid_utf8("\xed\xa0\x80") == 0);        // UTF-16 surrogate
  CHECK(find_invalid_utf8("\xf4\x90\x80\x80") == 0);    // above U+10FFFF
  CHECK(find_invalid_utf8("ok \xe2\x82\xac \x80") == 7);  // lone continuation after a valid €
}

TEST_CASE("UTF-8 sequence lengths", "[util]") {
  CHECK(nmt::utf8_sequence_length("a", 0) == 1);
  CHECK(nmt::utf8_sequence_length("\xc3\xbc", 0) == 2);           // ü
  CHECK(nmt::utf8_sequence_length("\xe6\x97\xa5", 0) == 3);       // 日
  CHECK(nmt::utf8_sequence_length("\xf0\x9f\x98\x80", 0) == 4);   // 😀
  CHECK(nmt::utf8_sequence_length("ab\xe6\x97", 2) == 0);         // cut short
  CHECK(nmt::utf8_sequence_length("\x80", 0) == 0);
}
