
#include "catch_torch.h"  // first: see the header

#include <zlib.h>

#include <vector>

#include "data/corpus_reader.h"
#include "test_support.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::data::FilterCounts;
using nmt::data::InvalidUtf8Policy;
using nmt::data::read_parallel;

namespace {

struct Pair {
  int64_t line;
  std::string src, tgt;
};

std::vector<Pair> read_all(const std::filesystem::path& src, const std::filesystem::path& tgt,
                           InvalidUtf8Policy policy, FilterCounts* counts) {
  std::vector<Pair> pairs;
  read_parallel(
      src, tgt, policy,
      [&](int64_t line, std::string_view s, std::string_view t) {
        pairs.push_back({line, std::string(s), std::string(t)});
      },
      counts);
  return pairs;
}

std::string error_of(const std::filesystem::path& src, const std::filesystem::path& tgt,
                     InvalidUtf8Policy policy = InvalidUtf8Policy::kError) {
  FilterCounts counts;
  try {
    read_all(src, tgt, policy, &counts);
  } catch (const nmt::DataError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("parallel reading pairs lines and skips empty ones with a count", "[data]") {
  nmt::test::TempDir dir;
  auto src = dir.write("a.en", "one\n\ntwo\r\nthree\n  \nlast without newline");
  auto tgt = dir.write("a.de", "eins\nleer\nzwei\r\ndrei\nvier\nletzte");
  FilterCounts counts;
  auto pairs = read_all(src, tgt, InvalidUtf8Policy::kError, &counts);
  REQUIRE(pairs.size() == 4);
  CHECK(pairs[0].line == 1);
  CHECK(pairs[1].src == "two");  // CR of CRLF dropped
  CHECK(pairs[1].tgt == "zwei");
  CHECK(pairs[3].line == 6);
  CHECK(pairs[3].src == "last without newline");
  CHECK(counts.read == 6);
  CHECK(counts.empty == 2);
  CHECK(counts.kept() == 4);
}

TEST_CASE("different line counts name both files and both counts", "[data]") {
  nmt::test::TempDir dir;
  auto src = dir.write("a.en", "1\n2\n3\n");
  auto tgt = dir.write("a.de", "1\n2\n3\n4\n5\n");
  CHECK(error_of(src, tgt) == "parallel files differ in line count: " + src.string() +
                                  " has 3 lines, " + tgt.string() + " has 5");
  CHECK(error_of(tgt, src) == "parallel files differ in line count: " + tgt.string() +
                                  " has 5 lines, " + src.string() + " has 3");
}

TEST_CASE("invalid UTF-8 is an error with file and line, or a counted skip", "[data]") {
  nmt::test::TempDir dir;
  auto src = dir.write("a.en", "fine\nalso fine\n");
  auto tgt = dir.write("a.de", "gut\nka\xffputt\n");
  CHECK(error_of(src, tgt) == tgt.string() +
                                  ":2: invalid UTF-8 at byte 3 (set data.invalid_utf8: skip to "
                                  "count and skip such lines)");
  FilterCounts counts;
  auto pairs = read_all(src, tgt, InvalidUtf8Policy::kSkip, &counts);
  CHECK(pairs.size() == 1);
  CHECK(counts.invalid_utf8 == 1);
  CHECK_THAT(error_of(dir.path() / "missing.en", tgt), Contains("missing.en: no such file"));
}

TEST_CASE("gzip-compressed corpora read like plain text", "[data]") {
  nmt::test::TempDir dir;
  const auto gz = dir.path() / "a.en.gz";
  gzFile f = gzopen(gz.c_str(), "wb");
  REQUIRE(f != nullptr);
  const std::string text = "compressed one\ncompressed two\n";
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  auto tgt = dir.write("a.de", "eins\nzwei\n");
  FilterCounts counts;
  auto pairs = read_all(gz, tgt, InvalidUtf8Policy::kError, &counts);
  REQUIRE(pairs.size() == 2);
  CHECK(pairs[1].src == "compressed two");
}

TEST_CASE("lines longer than the read buffer are read whole", "[data]") {
  nmt::test::TempDir dir;
  const std::string long_line(3 << 20, 'x');
  auto src = dir.write("a.en", "short\n" + long_line + "\nend\n");
  auto tgt = dir.write("a.de", "kurz\nlang\nende\n");
  FilterCounts counts;
  auto pairs = read_all(src, tgt, InvalidUtf8Policy::kError, &counts);
  REQUIRE(pairs.size() == 3);
  CHECK(pairs[1].src == long_line);
  CHECK(pairs[2].src == "end");
}
