#include "catch_torch.h"  // first: see the header

#include <xxhash.h>

#include <chrono>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/file_hash.h"
#include "test_support.h"
#include "util/error.h"

using nmt::data::hash_file;
using nmt::data::hash_file_remembered;

namespace {

/// A file of `size` bytes of a pattern that differs from position to position.
std::string patterned_bytes(size_t size, char salt) {
  std::string text(size, '\0');
  for (size_t i = 0; i < size; ++i) text[i] = static_cast<char>((i * 131 + i / 7 + salt) & 0xff);
  return text;
}

/// Sets a file's modification time an hour back: as a corpus is, long before it is read.
void age_file(const std::filesystem::path& file,
              std::chrono::minutes back = std::chrono::minutes(60)) {
  std::filesystem::last_write_time(file, std::filesystem::file_time_type::clock::now() - back);
}

nlohmann::json file_hash_memo(const std::filesystem::path& dir) {
  std::ifstream in(dir / "file-hashes.json");
  return in ? nlohmann::json::parse(in) : nlohmann::json();
}

}  // namespace

TEST_CASE("hash_file is the XXH3-64 of the bytes across its read buffers", "[data]") {
  nmt::test::TempDir dir;
  // 9 MB + 3: three reads of the 4 MiB buffer, the last one short.
  const std::string text = patterned_bytes(9'000'003, 1);
  const auto file = dir.write("big.bin", text);
  CHECK(hash_file(file) == XXH3_64bits(text.data(), text.size()));
  CHECK(nmt::data::hash_file_hex(file) ==
        fmt::format("{:016x}", XXH3_64bits(text.data(), text.size())));
  const auto empty = dir.write("empty.bin", "");
  CHECK(hash_file(empty) == XXH3_64bits(nullptr, 0));
  CHECK_THROWS_AS(hash_file(dir.path() / "missing"), nmt::DataError);
}

TEST_CASE("a remembered file hash is used while the file's stamp holds, read again when not",
          "[data]") {
  nmt::test::TempDir dir;
  const auto memo_dir = dir.path() / "cache";
  const std::string text = patterned_bytes(10'000, 2);
  const auto file = dir.write("corpus.en", text);
  age_file(file);
  const uint64_t real = XXH3_64bits(text.data(), text.size());
  CHECK(hash_file_remembered(file, memo_dir) == real);
  nlohmann::json memo = file_hash_memo(memo_dir);
  const std::string key = std::filesystem::absolute(file).lexically_normal().string();
  REQUIRE(memo["files"].contains(key));
  CHECK(memo["files"][key]["xxh3"] == fmt::format("{:016x}", real));
  CHECK(memo["files"][key]["size"] == 10'000);

  // The memo is what answers while the stamp holds: a planted value comes back unread.
  memo["files"][key]["xxh3"] = "0000000000000001";
  std::ofstream(memo_dir / "file-hashes.json") << memo.dump();
  CHECK(hash_file_remembered(file, memo_dir) == 1);

  // Same size, other bytes, another modification time: read again, and remembered anew.
  const std::string changed = patterned_bytes(10'000, 3);
  dir.write("corpus.en", changed);
  age_file(file, std::chrono::minutes(30));
  const uint64_t real_changed = XXH3_64bits(changed.data(), changed.size());
  REQUIRE(real_changed != real);
  CHECK(hash_file_remembered(file, memo_dir) == real_changed);
  CHECK(file_hash_memo(memo_dir)["files"][key]["xxh3"] == fmt::format("{:016x}", real_changed));

  // A second file joins the memo; the first stays.
  const auto other = dir.write("corpus.de", text);
  age_file(other);
  CHECK(hash_file_remembered(other, memo_dir) == real);
  CHECK(file_hash_memo(memo_dir)["files"].size() == 2);
}

TEST_CASE("a file modified just now is hashed but not remembered", "[data]") {
  // Written and then rewritten within one tick of the file system's clock, a file keeps its
  // stamp: a hash remembered after the first write would answer for the second.
  nmt::test::TempDir dir;
  const auto memo_dir = dir.path() / "cache";
  const auto file = dir.write("fresh.txt", "first version\n");
  CHECK(hash_file_remembered(file, memo_dir) == hash_file(file));
  const nlohmann::json memo = file_hash_memo(memo_dir);
  CHECK((memo.is_null() ||
         !memo["files"].contains(std::filesystem::absolute(file).lexically_normal().string())));
  dir.write("fresh.txt", "other version\n");  // same size
  CHECK(hash_file_remembered(file, memo_dir) == hash_file(file));
  CHECK(hash_file(file) == XXH3_64bits("other version\n", 14));
}

TEST_CASE("a damaged file-hash memo is read past and replaced", "[data]") {
  nmt::test::TempDir dir;
  const auto memo_dir = dir.path() / "cache";
  const auto file = dir.write("corpus.en", "some text\n");
  age_file(file);
  for (const std::string& damaged : {std::string("{not json"), std::string("[1, 2]"),
                                     std::string(R"({"version": 1, "files": {"x": 3}})")}) {
    INFO(damaged);
    dir.write("cache/file-hashes.json", damaged);
    CHECK(hash_file_remembered(file, memo_dir) == XXH3_64bits("some text\n", 10));
    CHECK(file_hash_memo(memo_dir)["files"].contains(
        std::filesystem::absolute(file).lexically_normal().string()));
  }
}
