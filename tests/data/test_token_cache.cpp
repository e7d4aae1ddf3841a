
#include "catch_torch.h"  // first: see the header

#include <fstream>

#include "data/token_cache.h"
#include "data_fixture.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::data::build_or_open_token_cache;

TEST_CASE("the token cache holds exactly the encoded, filtered corpus", "[data]") {
  const auto& corpus = nmt::test::small_corpus();
  const auto& cache = corpus.cache();
  const auto& counts = cache.counts();
  CHECK(counts.read == 3000);
  CHECK(cache.size() == counts.kept());
  CHECK(cache.size() > 2700);
  CHECK(counts.too_long > 0);  // max_len 100 with a 500-piece vocabulary drops a few
  // Every pair decodes back to its line of the corpus files.
  std::ifstream src(corpus.options.train_src), tgt(corpus.options.train_tgt);
  std::vector<std::string> src_lines, tgt_lines;
  for (std::string line; std::getline(src, line);) src_lines.push_back(line);
  for (std::string line; std::getline(tgt, line);) tgt_lines.push_back(line);
  const auto& vocab = corpus.prepared.vocab;
  for (int64_t i = 0; i < cache.size(); i += 97) {
    std::vector<int32_t> s, t;
    for (int64_t k = 0; k < cache.src_length(i); ++k) s.push_back(cache.src_id(i, k));
    for (int64_t k = 0; k < cache.tgt_length(i); ++k) t.push_back(cache.tgt_id(i, k));
    CHECK(s == vocab.src.encode(src_lines[cache.line_number(i) - 1]));
    CHECK(t == vocab.tgt.encode(tgt_lines[cache.line_number(i) - 1]));
    CHECK(cache.src_length(i) <= 100);
  }
}

TEST_CASE("a second run reuses the cache, a changed input builds a new one", "[data]") {
  const auto& corpus = nmt::test::small_corpus();
  nmt::test::TempDir dir;
  nmt::data::DataOptions options = corpus.options;
  options.train_src = nmt::test::head_of(dir, "ddtp.en-de.train.en.gz", "t.en", 200).string();
  options.train_tgt = nmt::test::head_of(dir, "ddtp.en-de.train.de.gz", "t.de", 200).string();
  const nmt::data::TokenCacheRequest request{"train", options.train_src, options.train_tgt,
                                             dir.path() / "cache", 1};
  auto first = build_or_open_token_cache(request, corpus.prepared.vocab, options);
  CHECK(first.built);
  auto second = build_or_open_token_cache(request, corpus.prepared.vocab, options);
  CHECK_FALSE(second.built);
  CHECK(second.cache.path() == first.cache.path());
  CHECK(second.cache.size() == first.cache.size());

  // One changed line: a new key, a fresh encode, and the stale cache removed.
  std::string text = nmt::test::read_file(options.train_tgt);
  text[0] = text[0] == 'X' ? 'Y' : 'X';
  dir.write("t.de", text);
  auto third = build_or_open_token_cache(request, corpus.prepared.vocab, options);
  CHECK(third.built);
  CHECK(third.cache.path() != first.cache.path());
  CHECK_FALSE(std::filesystem::exists(first.cache.path()));

  // Changed filter settings also change the key.
  options.max_len = 10;
  auto fourth = build_or_open_token_cache(request, corpus.prepared.vocab, options);
  CHECK(fourth.built);
  CHECK(fourth.cache.size() < third.cache.size());
}

TEST_CASE("a truncated cache file is detected", "[data]") {
  const auto& corpus = nmt::test::small_corpus();
  nmt::test::TempDir dir;
  const auto copy = dir.path() / "train.tok";
  std::filesystem::copy_file(corpus.cache().path(), copy);
  std::filesystem::resize_file(copy, std::filesystem::file_size(copy) - 10);
  try {
    nmt::data::TokenCache::open(copy);
    FAIL("expected DataError");
  } catch (const nmt::DataError& e) {
    CHECK_THAT(e.what(), Contains("token cache is truncated or damaged"));
  }
}

TEST_CASE("a cache whose offsets are damaged is refused, and rebuilt with a warning", "[data]") {
  const auto& corpus = nmt::test::small_corpus();
  nmt::test::TempDir dir;
  nmt::data::DataOptions options = corpus.options;
  options.train_src = nmt::test::head_of(dir, "ddtp.en-de.train.en.gz", "t.en", 200).string();
  options.train_tgt = nmt::test::head_of(dir, "ddtp.en-de.train.de.gz", "t.de", 200).string();
  const nmt::data::TokenCacheRequest request{"train", options.train_src, options.train_tgt,
                                             dir.path() / "cache", 1};
  const auto built = build_or_open_token_cache(request, corpus.prepared.vocab, options);
  REQUIRE(built.built);
  const auto file = built.cache.path();
  const int64_t size = built.cache.size();
  {
    // The file's layout: a 120-byte header, then the pairs + 1 source offsets (uint64 each).
    // Source offset 1 pointing far past the data would read out of bounds.
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(120 + 8);
    const uint64_t huge = uint64_t{1} << 40;
    f.write(reinterpret_cast<const char*>(&huge), sizeof(huge));
  }
  try {
    nmt::data::TokenCache::open(file);
    FAIL("expected DataError");
  } catch (const nmt::DataError& e) {
    CHECK_THAT(e.what(), Contains("token cache offsets are inconsistent at pair"));
  }
  const auto rebuilt = build_or_open_token_cache(request, corpus.prepared.vocab, options);
  CHECK(rebuilt.built);
  CHECK(rebuilt.cache.size() == size);
}
