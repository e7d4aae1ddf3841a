// XXH64 against published test vectors, and incremental updates against one-shot hashing.
#include <catch2/catch.hpp>

#include <string>

#include "checkpoint/xxhash64.h"

using nmt::checkpoint::hex64;
using nmt::checkpoint::XxHash64;

namespace {

uint64_t xxh64(const std::string& text) {
  XxHash64 hash;
  hash.update(text);
  return hash.digest();
}

}  // namespace

TEST_CASE("xxh64 matches the reference implementation's values", "[checkpoint]") {
  CHECK(xxh64("") == 0xEF46DB3751D8E999ull);
  CHECK(xxh64("a") == 0xD24EC4F1A98C6E5Bull);
  CHECK(xxh64("abc") == 0x44BC2CF5AD770999ull);
  // 39 bytes: exercises the 32-byte stripes and every tail size class.
  CHECK(xxh64("Nobody inspects the spammish repetition") == 0xFBCEA83C8A378BF1ull);
  CHECK(hex64(0xEF46DB3751D8E999ull) == "ef46db3751d8e999");
  CHECK(hex64(1) == "0000000000000001");
}

TEST_CASE("xxh64 in pieces equals xxh64 in one go, wherever the split", "[checkpoint]") {
  std::string text;
  for (int i = 0; i < 200; ++i) text += static_cast<char>((i * 37 + 11) & 0xFF);
  for (size_t length : {0, 1, 7, 31, 32, 33, 64, 100, 200}) {
    const std::string prefix = text.substr(0, length);
    const uint64_t whole = xxh64(prefix);
    for (size_t split = 0; split <= length; ++split) {
      for (size_t split2 = split; split2 <= length; split2 += 13) {
        XxHash64 hash;
        hash.update(prefix.substr(0, split));
        hash.update(prefix.substr(split, split2 - split));
        hash.update(prefix.substr(split2));
        INFO("length " << length << " splits " << split << ", " << split2);
        CHECK(hash.digest() == whole);
      }
    }
  }
  // digest() does not end the hash.
  XxHash64 hash;
  hash.update("ab");
  (void)hash.digest();
  hash.update("c");
  CHECK(hash.digest() == xxh64("abc"));
}
