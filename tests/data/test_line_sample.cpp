#include "catch_torch.h"  // first: see the header

#include <zlib.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "data/line_sample.h"
#include "test_support.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::data::LineSample;
using nmt::data::LineSampleOptions;
using nmt::data::sample_lines;

namespace {

/// A file of `lines` lines "<name> <i>" (1-based), with a blank line after every 10th.
std::filesystem::path numbered_file(const nmt::test::TempDir& dir, const std::string& name,
                                    int lines) {
  std::string text;
  for (int i = 1; i <= lines; ++i) {
    text += name + " " + std::to_string(i) + "\n";
    if (i % 10 == 0) text += (i % 20 == 0 ? "  \t\n" : "\n");
  }
  return dir.write(name, text);
}

std::filesystem::path gzip_copy(const nmt::test::TempDir& dir, const std::filesystem::path& file) {
  const std::string text = nmt::test::read_file(file);
  const auto gz = dir.path() / (file.filename().string() + ".gz");
  gzFile out = gzopen(gz.c_str(), "wb");
  REQUIRE(out != nullptr);
  REQUIRE(gzwrite(out, text.data(), static_cast<unsigned>(text.size())) == int(text.size()));
  REQUIRE(gzclose(out) == Z_OK);
  return gz;
}

LineSampleOptions options(int64_t lines, uint64_t seed, int threads = 1) {
  LineSampleOptions o;
  o.lines = lines;
  o.seed = seed;
  o.threads = threads;
  o.progress_name = "";
  return o;
}

/// (file name, line number) of a line "<name> <i>".
std::pair<std::string, int> place(const std::string& line) {
  const size_t space = line.find(' ');
  return {line.substr(0, space), std::stoi(line.substr(space + 1))};
}

}  // namespace

TEST_CASE("a line sample draws the asked number of distinct non-blank lines, in file order",
          "[data]") {
  nmt::test::TempDir dir;
  const std::vector<std::filesystem::path> files = {numbered_file(dir, "a", 300),
                                                    numbered_file(dir, "b", 500)};
  const nmt::data::LineSample sample = sample_lines(files, options(100, 7, 2));
  CHECK(sample.lines_read == 800);  // the 80 blank lines are not counted
  REQUIRE(sample.lines.size() == 100);
  std::vector<std::pair<std::string, int>> places;
  for (const std::string& line : sample.lines) places.push_back(place(line));
  CHECK(std::is_sorted(places.begin(), places.end()));
  CHECK(std::adjacent_find(places.begin(), places.end()) == places.end());
  for (const auto& [name, i] : places) {
    CHECK(i >= 1);
    CHECK(i <= (name == "a" ? 300 : 500));
  }
}

TEST_CASE("the same files and seed give the same line sample for any thread count, plain or gzip",
          "[data]") {
  nmt::test::TempDir dir;
  const std::vector<std::filesystem::path> plain = {
      numbered_file(dir, "a", 700), numbered_file(dir, "b", 400), numbered_file(dir, "c", 900)};
  std::vector<std::filesystem::path> gz;
  for (const auto& file : plain) gz.push_back(gzip_copy(dir, file));
  const auto reference = sample_lines(plain, options(250, 3, 1)).lines;
  CHECK(sample_lines(plain, options(250, 3, 3)).lines == reference);
  CHECK(sample_lines(plain, options(250, 3, 8)).lines == reference);
  CHECK(sample_lines(gz, options(250, 3, 2)).lines == reference);
  // Another seed, another sample; a smaller sample of the same seed is a part of it.
  CHECK(sample_lines(plain, options(250, 4, 2)).lines != reference);
  const auto smaller = sample_lines(plain, options(50, 3, 2)).lines;
  for (const std::string& line : smaller)
    CHECK(std::find(reference.begin(), reference.end(), line) != reference.end());
}

TEST_CASE("a line sample as large as the files is all their non-blank lines, in order", "[data]") {
  // A corpus below data.spm_sample_lines: SentencePiece gets every sentence, in corpus order,
  // as it did when it read the files itself.
  nmt::test::TempDir dir;
  const auto a = numbered_file(dir, "a", 30), b = numbered_file(dir, "b", 20);
  std::vector<std::string> expected;
  for (const auto& file : {a, b})
    for (const std::string& line : nmt::test::lines_of(nmt::test::read_file(file)))
      if (line.find_first_not_of(" \t") != std::string::npos) expected.push_back(line);
  REQUIRE(expected.size() == 50);
  CHECK(sample_lines({a, b}, options(50, 1, 2)).lines == expected);
  CHECK(sample_lines({a, b}, options(1000, 9, 1)).lines == expected);
  CHECK(sample_lines({a, b}, options(0, 1, 1)).lines.empty());
}

TEST_CASE("a line sample holds only the lines it has read whatever its size limit", "[data]") {
  // data.spm_sample_lines bounds the sample, not the memory set aside before reading: the
  // sample reserved room for all of them, 56 bytes a line (56 GB at 10^9; INT64_MAX threw).
  nmt::test::TempDir dir;
  const auto a = numbered_file(dir, "a", 30);
  const LineSample all = sample_lines({a}, options(std::numeric_limits<int64_t>::max(), 3, 1));
  CHECK(all.lines.size() == 30);
  CHECK(all.lines_read == 30);
  CHECK(all.lines == sample_lines({a}, options(1000, 3, 1)).lines);
}

TEST_CASE("every line is alike likely to be in a line sample, whichever file it is in", "[data]") {
  // Over 2000 seeds, 20 of 100 lines (10 in one file, 90 in the other): each line is drawn
  // Binomial(2000, 0.2) times, mean 400, standard deviation 17.9; the bounds are 6 of those
  // (fixed seeds: the test gives the same counts on every run).
  nmt::test::TempDir dir;
  const std::vector<std::filesystem::path> files = {dir.write("a",
                                                              [] {
                                                                std::string t;
                                                                for (int i = 1; i <= 10; ++i)
                                                                  t += "a " + std::to_string(i) +
                                                                       "\n";
                                                                return t;
                                                              }()),
                                                    dir.write("b", [] {
                                                      std::string t;
                                                      for (int i = 1; i <= 90; ++i)
                                                        t += "b " + std::to_string(i) + "\n";
                                                      return t;
                                                    }())};
  std::map<std::string, int> drawn;
  int64_t from_a = 0;
  for (uint64_t seed = 1; seed <= 2000; ++seed) {
    const auto sample = sample_lines(files, options(20, seed, 1)).lines;
    REQUIRE(sample.size() == 20);
    for (const std::string& line : sample) {
      ++drawn[line];
      from_a += line[0] == 'a';
    }
  }
  REQUIRE(drawn.size() == 100);
  for (const auto& [line, count] : drawn) {
    INFO(line);
    CHECK(count > 400 - 6 * 18);
    CHECK(count < 400 + 6 * 18);
  }
  // A tenth of the lines are in file a: a tenth of the draws (40000 in all).
  CHECK(from_a > 4000 - 6 * 60);
  CHECK(from_a < 4000 + 6 * 60);
}

TEST_CASE("a line sample of a file that cannot be read is an error naming it", "[data]") {
  nmt::test::TempDir dir;
  const auto a = numbered_file(dir, "a", 10);
  const auto missing = dir.path() / "missing.en";
  for (int threads : {1, 2}) {
    try {
      sample_lines({a, missing}, options(5, 1, threads));
      FAIL("expected DataError");
    } catch (const nmt::DataError& e) {
      CHECK_THAT(e.what(), Contains(missing.string()));
    }
  }
}
