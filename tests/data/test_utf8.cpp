
#include "catch_torch.h"  // first: see the header

#include "data/utf8.h"

using nmt::data::find_invalid_utf8;
constexpr size_t kValid = std::string_view::npos;

TEST_CASE("UTF-8 validation accepts valid text and finds the first bad byte", "[data]") {
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
