// The 13a tokenizer and the Python-compatible text helpers. Expected strings were produced by
// sacrebleu 2.6.0's Tokenizer13a (test_sacrebleu_parity.cpp checks the metrics end to end).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "eval/tokenizer.h"
#include "eval/unicode.h"

using nmt::eval::Tokenizer13a;

TEST_CASE("13a splits punctuation but keeps numbers, hyphens and apostrophes", "[eval]") {
  Tokenizer13a tok;
  CHECK(tok("Hello, world!") == "Hello , world !");
  CHECK(tok("It costs $1,000.50 (approx.).") == "It costs $ 1,000.50 ( approx . ) .");
  CHECK(tok("well-known e-mail, 3-4 years; 10-20") == "well-known e-mail , 3 - 4 years ; 10 - 20");
  CHECK(tok("U.S.A. is big.") == "U . S . A . is big .");
  CHECK(tok("a..b") == "a . . b");
  CHECK(tok("end.") == "end .");
  CHECK(tok("1.5.") == "1.5 .");
  CHECK(tok("x,y,z 1,2,3") == "x , y , z 1,2,3");
  CHECK(tok("3.14,2.71") == "3.14,2.71");
  CHECK(tok("2-") == "2 -");
  CHECK(tok("-3") == "-3");
  CHECK(tok("'quoted' `tick`") == "'quoted' ` tick `");
  CHECK(tok("[x]{y}|z~^_\\") == "[ x ] { y } | z ~ ^ _ \\");
}

TEST_CASE("13a unescapes &quot, &amp, &lt, &gt, in order, one pass each", "[eval]") {
  Tokenizer13a tok;
  CHECK(tok("He said &quot;hi&quot; &amp; left.") == "He said \" hi \" & left .");
  // &amp; is unescaped before &lt; and &gt;, so a double escape collapses fully.
  CHECK(tok("&amp;lt;b&amp;gt;") == "< b >");
  CHECK(tok("&amp;quot;") == "& quot ;");  // &quot; was replaced before &amp; produced it
  CHECK(tok("AT&T") == "AT & T");
}

TEST_CASE("13a drops <skipped>, joins hyphenated line breaks and normalizes spaces", "[eval]") {
  Tokenizer13a tok;
  CHECK(tok("<skipped> gone") == "gone");
  CHECK(tok("line-\nbreak\nnext") == "linebreak next");
  CHECK(tok("  lots   of\tspace  ") == "lots of space");
  CHECK(tok("") == "");
  CHECK(tok("   ") == "");
  // Python's str.split() splits at NBSP and ideographic space, not at a zero-width space.
  CHECK(tok("a\u00a0b\u3000c\u200bd") == "a b c\u200bd");
}

TEST_CASE("13a leaves non-ASCII characters whole", "[eval]") {
  Tokenizer13a tok;
  CHECK(tok("Größe: 5€ — ja?") == "Größe : 5€ — ja ?");
  CHECK(tok("中文，测试。") == "中文，测试。");
  CHECK(tok("😀!") == "😀 !");
  CHECK(tok("ä.ö,ü") == "ä . ö , ü");
  // The buffers are reused: a long line after a short one, then a short one again.
  const std::string long_line(5000, 'x');
  CHECK(tok(long_line + ".") == long_line + " .");
  CHECK(tok("ok.") == "ok .");
}

TEST_CASE("Python whitespace", "[eval]") {
  CHECK(nmt::eval::rstrip("a b \t\r\u3000\u00a0") == "a b");
  CHECK(nmt::eval::rstrip("a\u200b") == "a\u200b");
  CHECK(nmt::eval::rstrip("  ") == "");
  std::vector<std::string_view> words;
  nmt::eval::split_words("\u2009 x\x1fy\u0085z\u3000", words);
  CHECK(words == std::vector<std::string_view>{"x", "y", "z"});

  size_t pos = 0;
  CHECK(nmt::eval::next_code_point("\xe4\xb8\xad", pos) == 0x4E2D);
  CHECK(pos == 3);
  pos = 0;
  CHECK(nmt::eval::next_code_point("\xff", pos) == 0xDCFF);  // surrogateescape
  CHECK(pos == 1);
}
