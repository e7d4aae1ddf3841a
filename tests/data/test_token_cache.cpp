
#include "catch_torch.h"  // first: see the header

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <thread>

#include "data/batch_tensors.h"
#include "data/corpus_encoder.h"
#include "data/token_cache.h"
#include "data/token_cache_format.h"
#include "data/token_cache_writer.h"
#include "data_fixture.h"
#include "skip.h"
#include "util/error.h"
#include "util/file_lock.h"
#include "util/host_name.h"

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

TEST_CASE("rebuilding a corpus's cache leaves those of corpora whose names extend it", "[data]") {
  // Caches are "<name>.<key>.tok": a rebuild of "web" removed "web.v2"'s cache too (it starts
  // with "web."), which then took a fresh encode, minutes at scale.
  const auto& corpus = nmt::test::small_corpus();
  nmt::test::TempDir dir;
  nmt::data::DataOptions options = corpus.options;
  options.train_src = nmt::test::head_of(dir, "ddtp.en-de.train.en.gz", "t.en", 100).string();
  options.train_tgt = nmt::test::head_of(dir, "ddtp.en-de.train.de.gz", "t.de", 100).string();
  const auto request = [&](const char* name) {
    return nmt::data::TokenCacheRequest{name, options.train_src, options.train_tgt,
                                        dir.path() / "cache", 1};
  };
  const auto web_v2 = build_or_open_token_cache(request("web.v2"), corpus.prepared.vocab, options);
  const auto web = build_or_open_token_cache(request("web"), corpus.prepared.vocab, options);
  options.max_len = 10;  // a new key for "web": its old cache goes, "web.v2"'s stays
  const auto rebuilt = build_or_open_token_cache(request("web"), corpus.prepared.vocab, options);
  CHECK(rebuilt.built);
  CHECK_FALSE(std::filesystem::exists(web.cache.path()));
  CHECK(std::filesystem::exists(web_v2.cache.path()));
  CHECK(nmt::data::is_token_cache_of("web.0123456789abcdef.tok", "web"));
  CHECK_FALSE(nmt::data::is_token_cache_of("web.v2.0123456789abcdef.tok", "web"));
  CHECK_FALSE(nmt::data::is_token_cache_of("web.0123456789abcdeg.tok", "web"));
  CHECK_FALSE(nmt::data::is_token_cache_of("web.0123456789abcdef.tok.tmp-12", "web"));
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

namespace {

/// The bytes of a file.
std::string file_bytes(const std::filesystem::path& file) { return nmt::test::read_file(file); }

/// Files of `dir` whose name holds ".tmp-": what a cache build leaves while it runs.
int temp_files_in(const std::filesystem::path& dir) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    n += entry.path().filename().string().find(".tmp-") != std::string::npos;
  return n;
}

}  // namespace

TEST_CASE("the cache is byte-identical whatever the encoding threads and chunk size", "[data]") {
  const auto& corpus = nmt::test::small_corpus();
  nmt::test::TempDir dir;
  nmt::data::DataOptions options = corpus.options;
  options.train_src = nmt::test::head_of(dir, "ddtp.en-de.train.en.gz", "t.en", 1000).string();
  options.train_tgt = nmt::test::head_of(dir, "ddtp.en-de.train.de.gz", "t.de", 1000).string();
  options.max_len = 40;  // some pairs filtered out, inside chunks
  // One thread, one chunk: the order of the corpus by construction.
  nmt::data::TokenCacheRequest request{
      "one", options.train_src, options.train_tgt, dir.path() / "one", 1, {}, {}, 1 << 20};
  const auto one = build_or_open_token_cache(request, corpus.prepared.vocab, options);
  REQUIRE(one.built);
  CHECK(one.cache.counts().too_long > 0);
  // Four threads over chunks of 7 pairs, finishing out of order, written in order.
  request = {"many", options.train_src, options.train_tgt, dir.path() / "many", 4, {}, {}, 7};
  const auto many = build_or_open_token_cache(request, corpus.prepared.vocab, options);
  REQUIRE(many.built);
  CHECK(many.cache.size() == one.cache.size());
  CHECK(file_bytes(many.cache.path()) == file_bytes(one.cache.path()));
  CHECK(temp_files_in(dir.path() / "many") == 0);  // the streamed parts are gone
  // With source tags too (the prefix is written before each source sentence's ids).
  request = {"tagged-one", options.train_src, options.train_tgt, dir.path() / "t1", 1, {5, 6}};
  const auto tagged_one = build_or_open_token_cache(request, corpus.prepared.vocab, options);
  request = {
      "tagged-one", options.train_src, options.train_tgt, dir.path() / "t3", 3, {5, 6}, {}, 5};
  const auto tagged_many = build_or_open_token_cache(request, corpus.prepared.vocab, options);
  CHECK(tagged_one.cache.src_id(0, 1) == 6);
  CHECK(file_bytes(tagged_many.cache.path()) == file_bytes(tagged_one.cache.path()));
}

TEST_CASE("a failed encoding leaves no cache and no temporary file behind", "[data]") {
  const auto& corpus = nmt::test::small_corpus();
  nmt::test::TempDir dir;
  nmt::data::DataOptions options = corpus.options;
  const auto src = nmt::test::head_of(dir, "ddtp.en-de.train.en.gz", "t.en", 300);
  const auto tgt = nmt::test::head_of(dir, "ddtp.en-de.train.de.gz", "t.de", 299);
  const nmt::data::TokenCacheRequest request{"train", src, tgt, dir.path() / "cache",
                                             2,       {},  {},  16};
  CHECK_THROWS_WITH(build_or_open_token_cache(request, corpus.prepared.vocab, options),
                    Contains("parallel files differ in line count"));
  CHECK(temp_files_in(dir.path() / "cache") == 0);
  // Only the build lock's file, which stays (removing it would let a third builder in).
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() / "cache"))
    left.push_back(entry.path().filename().string());
  CHECK(left == std::vector<std::string>{"train.lock"});
}

TEST_CASE("a token cache past 2^32 tokens reads the pairs beyond (sparse file)", "[data]") {
  namespace format = nmt::data::token_cache_format;
  nmt::test::TempDir dir;
  const auto file = dir.path() / "big.tok";
  // Three pairs: the first holds 2^32 + 10 source ids (zeros, never written: a hole), the
  // others lie beyond 2^32 ids, where 32-bit offsets would wrap to the file's start.
  const uint64_t big = (uint64_t{1} << 32) + 10;
  const uint64_t src_offsets[] = {0, big, big + 3, big + 5};
  const uint64_t tgt_offsets[] = {0, 1, 4, 6};
  const uint64_t lines[] = {1, 2, 3};
  const uint16_t src_tail[] = {7, 8, 9, 10, 11};
  const uint16_t tgt_ids[] = {1, 2, 3, 4, 5, 6};
  format::Header h{};
  std::memcpy(h.magic, format::kMagic, sizeof(format::kMagic));
  h.version = format::kFormatVersion;
  h.id_bytes = 2;
  h.pairs = 3;
  h.src_ids = big + 5;
  h.tgt_ids = 6;
  h.read = 3;
  const uint64_t src_ids_at = sizeof(h) + sizeof(src_offsets) + sizeof(tgt_offsets) + sizeof(lines);
  const uint64_t tgt_ids_at = src_ids_at + format::padded8(h.src_ids * 2);
  {
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(&h), sizeof(h));
    out.write(reinterpret_cast<const char*>(src_offsets), sizeof(src_offsets));
    out.write(reinterpret_cast<const char*>(tgt_offsets), sizeof(tgt_offsets));
    out.write(reinterpret_cast<const char*>(lines), sizeof(lines));
    out.seekp(static_cast<std::streamoff>(src_ids_at + 2 * big));
    out.write(reinterpret_cast<const char*>(src_tail), sizeof(src_tail));
    out.seekp(static_cast<std::streamoff>(tgt_ids_at));
    out.write(reinterpret_cast<const char*>(tgt_ids), sizeof(tgt_ids));
    out.seekp(static_cast<std::streamoff>(format::expected_file_size(h) - 1));
    out.put('\0');  // the padding's last byte: the file has its full size
    if (!out)
      NMT_SKIP("cannot write a sparse file of " << format::expected_file_size(h) << " bytes here");
  }
  REQUIRE(std::filesystem::file_size(file) == format::expected_file_size(h));
  const auto cache = nmt::data::TokenCache::open(file);
  REQUIRE(cache.size() == 3);
  CHECK(cache.src_tokens() == static_cast<int64_t>(big + 5));
  CHECK(cache.src_length(0) == static_cast<int64_t>(big));
  CHECK(cache.src_id(0, static_cast<int64_t>(big) - 1) == 0);  // in the hole
  CHECK(cache.src_length(1) == 3);
  CHECK(cache.src_id(1, 0) == 7);
  CHECK(cache.src_id(1, 2) == 9);
  CHECK(cache.src_id(2, 1) == 11);
  CHECK(cache.tgt_id(2, 1) == 6);
  CHECK(cache.line_number(2) == 3);
  // Through the corpus set and the batch tensors, as training reads them.
  const nmt::data::CorpusSet corpora(cache);
  CHECK(corpora.src_id(2, 0) == 10);
  nmt::data::Batch batch;
  batch.pairs = {1, 2};
  batch.src_len = 4, batch.tgt_len = 4;
  const auto tensors = nmt::data::make_batch_tensors(corpora, batch, {0, 2, 3});
  CHECK(tensors.src[0][0].item<int64_t>() == 7);
  CHECK(tensors.src[1][1].item<int64_t>() == 11);
  CHECK(tensors.src[0][3].item<int64_t>() == 3);  // EOS
}

TEST_CASE("a cache another process is building is waited for and opened, not built twice",
          "[data]") {
  // There was no lock: the launchers of nodes that share a file system, or a node's ranks under
  // torchrun or Slurm, each encoded the same corpus at once.
  const auto& corpus = nmt::test::small_corpus();
  nmt::test::TempDir dir;
  const auto src = nmt::test::head_of(dir, "ddtp.en-de.train.en.gz", "t.en", 200);
  const auto tgt = nmt::test::head_of(dir, "ddtp.en-de.train.de.gz", "t.de", 200);
  const nmt::data::TokenCacheRequest request{"train", src, tgt, dir.path() / "cache", 1};
  std::filesystem::create_directories(request.dir);
  // "The other process": holds the build lock while the cache appears.
  std::optional<nmt::FileLock> other = nmt::FileLock::try_lock(request.dir / "train.lock");
  REQUIRE(other->held());
  nmt::data::TokenCacheResult waited;
  std::thread waiter(
      [&] { waited = build_or_open_token_cache(request, corpus.prepared.vocab, corpus.options); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const nmt::data::TokenCacheRequest elsewhere{"train", src, tgt, dir.path() / "elsewhere", 1};
  const auto built = build_or_open_token_cache(elsewhere, corpus.prepared.vocab, corpus.options);
  REQUIRE(built.built);
  std::filesystem::copy_file(built.cache.path(), request.dir / built.cache.path().filename());
  other.reset();  // lets go of train.lock
  waiter.join();
  CHECK_FALSE(waited.built);
  CHECK(waited.cache.size() == built.cache.size());
}

TEST_CASE("temporary files of a build that did not finish are removed by the next build",
          "[data]") {
  // A killed encoding (a time limit, an OOM kill) left up to twice the cache's size in temp
  // files that nothing swept.
  const auto& corpus = nmt::test::small_corpus();
  nmt::test::TempDir dir;
  const auto src = nmt::test::head_of(dir, "ddtp.en-de.train.en.gz", "t.en", 100);
  const auto tgt = nmt::test::head_of(dir, "ddtp.en-de.train.de.gz", "t.de", 100);
  const auto cache = dir.path() / "cache";
  std::filesystem::create_directories(cache);
  const std::string key = "0123456789abcdef";
  const std::string host = nmt::host_name().value_or("localhost");
  const std::string alive = std::to_string(::getppid());  // ctest, or the shell
  const auto touch = [&cache](const std::string& name, bool old = false) {
    std::ofstream(cache / name) << "x";
    if (old)
      std::filesystem::last_write_time(cache / name, std::filesystem::file_time_type::clock::now() -
                                                         2 * nmt::data::kStaleCacheTempAge);
  };
  touch("train." + key + ".tok.tmp-other-host.example-4242.src-ids", true);  // another node's, old
  touch("train." + key + ".tok.tmp-busy-host-77.src-ids");    // another node's, being written
  touch("train." + key + ".tok.tmp-" + host + "-999999999");  // this host, dead
  touch("train." + key + ".tok.tmp-" + host + "-" + alive + ".tgt-offsets");  // a live builder
  touch("train." + key + ".tok.tmp-31337", true);                // before hosts were named
  touch("train.v2." + key + ".tok.tmp-" + host + "-999999999");  // another corpus's
  // Without the build lock, only this host's dead builders can be told.
  const auto unlocked = nmt::data::remove_dead_cache_temps(cache, "train", false);
  REQUIRE(unlocked.size() == 1);
  CHECK(unlocked[0].filename() == "train." + key + ".tok.tmp-" + host + "-999999999");
  // A build holds the lock: other hosts' old temps of its corpus go too; another host's fresh
  // one (a file system whose locks are per host) and the other corpus's stay.
  const nmt::data::TokenCacheRequest request{"train", src, tgt, cache, 1};
  REQUIRE(build_or_open_token_cache(request, corpus.prepared.vocab, corpus.options).built);
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(cache))
    if (entry.path().filename().string().find(".tmp-") != std::string::npos)
      left.push_back(entry.path().filename().string());
  std::sort(left.begin(), left.end());
  std::vector<std::string> kept{"train." + key + ".tok.tmp-" + host + "-" + alive + ".tgt-offsets",
                                "train." + key + ".tok.tmp-busy-host-77.src-ids",
                                "train.v2." + key + ".tok.tmp-" + host + "-999999999"};
  std::sort(kept.begin(), kept.end());
  CHECK(left == kept);
}

TEST_CASE("SIGINT while encoding removes the temporary files, then ends the process by it",
          "[data]") {
  // Ctrl-C during data preparation killed the process with the streamed parts left behind.
  const auto& corpus = nmt::test::small_corpus();
  nmt::test::TempDir dir;
  nmt::data::DataOptions options = corpus.options;
  options.train_src = nmt::test::head_of(dir, "ddtp.en-de.train.en.gz", "t.en", 3000).string();
  options.train_tgt = nmt::test::head_of(dir, "ddtp.en-de.train.de.gz", "t.de", 3000).string();
  options.spm_model = corpus.prepared.vocab.src.model_path().string();
  const auto run = dir.path() / "run";
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // A watcher signals once the first temp file exists, as a user's Ctrl-C would.
    std::thread watcher([&run] {
      for (int i = 0; i < 20000; ++i) {
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(run / "cache", ec))
          if (e.path().filename().string().find(".tmp-") != std::string::npos) {
            ::kill(::getpid(), SIGINT);
            return;
          }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
    watcher.detach();
    try {
      nmt::data::prepare_data(options, run, {1, 1});
    } catch (...) {
    }
    ::_exit(0);  // not reached when the signal ends it
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == SIGINT);
  CHECK(temp_files_in(run / "cache") == 0);
}

TEST_CASE("the encoder keeps at most max_bytes_in_flight of text in flight", "[data]") {
  // The chunks in flight followed the thread count alone (2 x threads + 1 chunks of 16384
  // pairs): 128 threads held about 4M pairs in memory.
  const auto& corpus = nmt::test::small_corpus();
  nmt::test::TempDir dir;
  const auto src = nmt::test::head_of(dir, "ddtp.en-de.train.en.gz", "t.en", 1000);
  const auto tgt = nmt::test::head_of(dir, "ddtp.en-de.train.de.gz", "t.de", 1000);
  size_t peak = 0;
  nmt::data::CorpusEncoderOptions options{src, tgt, {}, {}, 4, 16384};
  options.max_bytes_in_flight = 8192;
  options.peak_bytes_in_flight = &peak;
  nmt::data::TokenCacheWriter writer(dir.path() / "bounded.tok", 1, 2);
  const auto counts =
      nmt::data::encode_corpus(options, corpus.prepared.vocab, corpus.options, writer);
  writer.finish(counts);
  CHECK(peak > 0);
  CHECK(peak <= 8192);
  // The same cache as one chunk at a time without a bound.
  nmt::data::CorpusEncoderOptions plain{src, tgt, {}, {}, 1, 16384};
  plain.max_bytes_in_flight = size_t{1} << 30;
  nmt::data::TokenCacheWriter plain_writer(dir.path() / "plain.tok", 1, 2);
  plain_writer.finish(
      nmt::data::encode_corpus(plain, corpus.prepared.vocab, corpus.options, plain_writer));
  CHECK(file_bytes(dir.path() / "bounded.tok") == file_bytes(dir.path() / "plain.tok"));
}
