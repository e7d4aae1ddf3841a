#include "data/token_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "data/file_hash.h"
#include "util/error.h"
#include "util/log.h"
#include "util/phase_progress.h"
#include "util/timer.h"

namespace nmt::data {
namespace {

constexpr char kMagic[8] = {'N', 'M', 'T', 'T', 'O', 'K', '\0', '\1'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kChunkPairs = 16384;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t id_bytes;
  uint64_t key;
  uint64_t pairs;
  uint64_t src_ids;
  uint64_t tgt_ids;
  int64_t read, empty, invalid_utf8, too_long, length_ratio;
  uint64_t reserved[4];
};
static_assert(sizeof(Header) % 8 == 0, "header keeps the arrays 8-byte aligned");

uint64_t padded8(uint64_t bytes) { return (bytes + 7) / 8 * 8; }

uint64_t expected_file_size(const Header& h) {
  return sizeof(Header) + 8 * (2 * (h.pairs + 1) + h.pairs) + padded8(h.src_ids * h.id_bytes) +
         padded8(h.tgt_ids * h.id_bytes);
}

/// Encoded pairs accumulated before writing.
struct Encoded {
  std::vector<uint64_t> src_offsets{0}, tgt_offsets{0}, line_numbers;
  std::vector<int32_t> src_ids, tgt_ids;
  FilterCounts counts;
};

/// Encodes one chunk of raw pairs on `threads` threads, then filters and appends in order.
void encode_chunk(const std::vector<std::string>& src, const std::vector<std::string>& tgt,
                  const std::vector<int64_t>& lines, const Vocabularies& vocab,
                  const DataOptions& options, const std::vector<int32_t>& src_prefix,
                  const std::vector<int32_t>& tgt_prefix, int threads, Encoded* out) {
  const size_t n = src.size();
  std::vector<std::vector<int32_t>> src_ids(n), tgt_ids(n);
  auto work = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      src_ids[i] = vocab.src.encode(src[i]);
      tgt_ids[i] = vocab.tgt.encode(tgt[i]);
    }
  };
  std::vector<std::thread> pool;
  const size_t per = (n + threads - 1) / std::max(1, threads);
  for (size_t begin = 0; begin < n; begin += per)
    pool.emplace_back(work, begin, std::min(n, begin + per));
  for (auto& t : pool) t.join();
  for (size_t i = 0; i < n; ++i) {
    const auto s = static_cast<int64_t>(src_ids[i].size());
    const auto t = static_cast<int64_t>(tgt_ids[i].size());
    if (s == 0 || t == 0) {  // text that encodes to nothing (e.g. only control characters)
      ++out->counts.empty;
      continue;
    }
    const auto tags = static_cast<int64_t>(src_prefix.size());
    const auto tgt_tags = static_cast<int64_t>(tgt_prefix.size());
    if (s + tags > options.max_len || t + tgt_tags > options.max_len) {
      ++out->counts.too_long;
      continue;
    }
    // Ratio with EOS counted, so 1-piece vs 3-piece pairs are not thrown out as misaligned.
    const double ratio = double(std::max(s, t) + 1) / double(std::min(s, t) + 1);
    if (ratio > options.max_len_ratio) {
      ++out->counts.length_ratio;
      continue;
    }
    out->src_ids.insert(out->src_ids.end(), src_prefix.begin(), src_prefix.end());
    out->src_ids.insert(out->src_ids.end(), src_ids[i].begin(), src_ids[i].end());
    out->tgt_ids.insert(out->tgt_ids.end(), tgt_prefix.begin(), tgt_prefix.end());
    out->tgt_ids.insert(out->tgt_ids.end(), tgt_ids[i].begin(), tgt_ids[i].end());
    out->src_offsets.push_back(out->src_ids.size());
    out->tgt_offsets.push_back(out->tgt_ids.size());
    out->line_numbers.push_back(static_cast<uint64_t>(lines[i]));
  }
}

void write_all(FILE* f, const void* data, size_t bytes, const std::filesystem::path& path) {
  static const char zeros[8] = {};
  NMT_CHECK(std::fwrite(data, 1, bytes, f) == bytes, DataError, "{}: write failed: {}",
            path.string(), std::strerror(errno));
  const size_t pad = padded8(bytes) - bytes;
  NMT_CHECK(std::fwrite(zeros, 1, pad, f) == pad, DataError, "{}: write failed: {}",
            path.string(), std::strerror(errno));
}

template <class Id>
std::vector<Id> narrow_ids(const std::vector<int32_t>& ids) {
  return std::vector<Id>(ids.begin(), ids.end());
}

void write_cache(const Encoded& e, uint64_t key, int id_bytes, const std::filesystem::path& file) {
  const std::filesystem::path tmp = file.string() + fmt::format(".tmp-{}", ::getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  NMT_CHECK(f != nullptr, DataError, "{}: cannot create: {}", tmp.string(), std::strerror(errno));
  try {
    Header h{};
    std::memcpy(h.magic, kMagic, sizeof(kMagic));
    h.version = kFormatVersion;
    h.id_bytes = static_cast<uint32_t>(id_bytes);
    h.key = key;
    h.pairs = e.line_numbers.size();
    h.src_ids = e.src_ids.size();
    h.tgt_ids = e.tgt_ids.size();
    h.read = e.counts.read, h.empty = e.counts.empty, h.invalid_utf8 = e.counts.invalid_utf8;
    h.too_long = e.counts.too_long, h.length_ratio = e.counts.length_ratio;
    write_all(f, &h, sizeof(h), tmp);
    write_all(f, e.src_offsets.data(), e.src_offsets.size() * 8, tmp);
    write_all(f, e.tgt_offsets.data(), e.tgt_offsets.size() * 8, tmp);
    write_all(f, e.line_numbers.data(), e.line_numbers.size() * 8, tmp);
    for (const auto* ids : {&e.src_ids, &e.tgt_ids}) {
      if (id_bytes == 2) {
        const auto narrow = narrow_ids<uint16_t>(*ids);
        write_all(f, narrow.data(), narrow.size() * 2, tmp);
      } else {
        write_all(f, ids->data(), ids->size() * 4, tmp);
      }
    }
    NMT_CHECK(std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0, DataError,
              "{}: write failed: {}", tmp.string(), std::strerror(errno));
  } catch (...) {
    std::fclose(f);
    std::filesystem::remove(tmp);
    throw;
  }
  std::fclose(f);
  std::filesystem::rename(tmp, file);
}

}  // namespace

TokenCache TokenCache::open(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY);
  NMT_CHECK(fd >= 0, DataError, "{}: cannot open token cache: {}", file.string(),
            std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < sizeof(Header)) {
    ::close(fd);
    NMT_THROW(DataError, "{}: not a token cache (only {} bytes)", file.string(), size);
  }
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  NMT_CHECK(base != MAP_FAILED, DataError, "{}: mmap failed: {}", file.string(),
            std::strerror(errno));
  TokenCache cache;
  cache.mapping_ = std::shared_ptr<void>(base, [size](void* p) { ::munmap(p, size); });
  cache.path_ = file;
  const auto* h = static_cast<const Header*>(base);
  NMT_CHECK(std::memcmp(h->magic, kMagic, sizeof(kMagic)) == 0 && h->version == kFormatVersion,
            DataError, "{}: not a token cache of format version {}", file.string(),
            kFormatVersion);
  NMT_CHECK(h->id_bytes == 2 || h->id_bytes == 4, DataError, "{}: bad id width {}",
            file.string(), h->id_bytes);
  NMT_CHECK(size == expected_file_size(*h), DataError,
            "{}: token cache is truncated or damaged ({} bytes, expected {})", file.string(), size,
            expected_file_size(*h));
  const char* p = static_cast<const char*>(base) + sizeof(Header);
  cache.pairs_ = static_cast<int64_t>(h->pairs);
  cache.id_bytes_ = static_cast<int>(h->id_bytes);
  cache.src_offsets_ = reinterpret_cast<const uint64_t*>(p);
  cache.tgt_offsets_ = cache.src_offsets_ + h->pairs + 1;
  cache.line_numbers_ = cache.tgt_offsets_ + h->pairs + 1;
  cache.src_ids_ = cache.line_numbers_ + h->pairs;
  cache.tgt_ids_ = static_cast<const char*>(cache.src_ids_) + padded8(h->src_ids * h->id_bytes);
  NMT_CHECK(cache.src_offsets_[h->pairs] == h->src_ids && cache.tgt_offsets_[h->pairs] == h->tgt_ids,
            DataError, "{}: token cache offsets are inconsistent", file.string());
  // Every offset is read unchecked later (sentence i spans offsets[i] to offsets[i + 1]), so a
  // damaged file must not get past here: offsets start at 0 and never decrease (then none
  // exceeds the final one, checked above), line numbers increase from 1.
  NMT_CHECK(cache.src_offsets_[0] == 0 && cache.tgt_offsets_[0] == 0, DataError,
            "{}: token cache offsets are inconsistent (the first is not 0)", file.string());
  for (uint64_t i = 0; i < h->pairs; ++i) {
    NMT_CHECK(cache.src_offsets_[i] <= cache.src_offsets_[i + 1] &&
                  cache.tgt_offsets_[i] <= cache.tgt_offsets_[i + 1] &&
                  cache.line_numbers_[i] > (i ? cache.line_numbers_[i - 1] : 0),
              DataError, "{}: token cache offsets are inconsistent at pair {}", file.string(), i);
  }
  cache.counts_ = FilterCounts{h->read, h->empty, h->invalid_utf8, h->too_long, h->length_ratio};
  return cache;
}

uint64_t token_cache_key(const TokenCacheRequest& request, const Vocabularies& vocab,
                         const DataOptions& options) {
  Fnv1a64 key;
  key.update("nmt-token-cache");
  key.update_value(kFormatVersion);
  key.update_value(hash_file(request.src));
  key.update_value(hash_file(request.tgt));
  // The model as loaded, not as the file is: a model with user-defined tags, loaded with them
  // as control symbols (vocab.h), encodes the text `<BT>` otherwise than it did, so a cache
  // built before that must not be reused. Equal to the file's fingerprint for any other model,
  // which keeps its key.
  key.update(vocab.src.encoding_fingerprint());
  key.update(vocab.tgt.encoding_fingerprint());
  key.update_value(options.max_len);
  key.update_value(options.max_len_ratio);
  key.update_value(static_cast<int>(options.invalid_utf8));
  // Only when tagged, so an untagged corpus keeps the key (and cache) it had before tags.
  if (!request.src_prefix.empty()) {
    key.update("src_prefix");
    for (int32_t id : request.src_prefix) key.update_value(id);
  }
  if (!request.tgt_prefix.empty()) {
    key.update("tgt_prefix");
    for (int32_t id : request.tgt_prefix) key.update_value(id);
  }
  return key.digest();
}

TokenCacheResult build_or_open_token_cache(const TokenCacheRequest& request,
                                           const Vocabularies& vocab,
                                           const DataOptions& options) {
  const uint64_t key = token_cache_key(request, vocab, options);
  const std::filesystem::path file =
      request.dir / fmt::format("{}.{:016x}.tok", request.name, key);
  TokenCacheResult result;
  if (std::filesystem::exists(file)) {
    try {
      result.cache = TokenCache::open(file);
      return result;
    } catch (const DataError& e) {
      log::warn("data", "rebuilding the token cache: {}", e.what());
    }
  }
  std::filesystem::create_directories(request.dir);
  log::info("data", "encoding {} / {} into {}", request.src.string(), request.tgt.string(),
            file.string());
  const auto start = std::chrono::steady_clock::now();
  // A line every 10 s with the rate and an ETA (from the share of the source file read): on
  // millions of pairs encoding takes minutes. prepare.cpp logs the closing figures.
  log::PhaseProgress progress("data", "encoding " + request.name, "pairs");
  double fraction_read = 0;
  Encoded encoded;
  std::vector<std::string> src, tgt;
  std::vector<int64_t> lines;
  auto flush = [&] {
    encode_chunk(src, tgt, lines, vocab, options, request.src_prefix, request.tgt_prefix,
                 request.threads, &encoded);
    src.clear(), tgt.clear(), lines.clear();
    progress.update(double(encoded.counts.read), fraction_read);
  };
  read_parallel(
      request.src, request.tgt, options.invalid_utf8,
      [&](int64_t line, std::string_view s, std::string_view t) {
        src.emplace_back(s), tgt.emplace_back(t), lines.push_back(line);
        if (src.size() == kChunkPairs) flush();
      },
      &encoded.counts, [&](double fraction) { fraction_read = fraction; });
  flush();
  NMT_CHECK(!encoded.line_numbers.empty(), DataError,
            "{} / {}: no sentence pair left after filtering ({} read, {} empty, {} invalid "
            "UTF-8, {} longer than data.max_len, {} over data.max_len_ratio)",
            request.src.string(), request.tgt.string(), encoded.counts.read, encoded.counts.empty,
            encoded.counts.invalid_utf8, encoded.counts.too_long, encoded.counts.length_ratio);
  const int id_bytes = std::max(vocab.src.size(), vocab.tgt.size()) <= 65536 ? 2 : 4;
  write_cache(encoded, key, id_bytes, file);
  result.encode_seconds = seconds_since(start);
  // Caches of this corpus made with other inputs or settings are stale now.
  for (const auto& entry : std::filesystem::directory_iterator(request.dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.path() != file && name.rfind(request.name + ".", 0) == 0 &&
        entry.path().extension() == ".tok") {
      std::error_code ignored;
      std::filesystem::remove(entry.path(), ignored);
    }
  }
  result.cache = TokenCache::open(file);
  result.built = true;
  return result;
}

}  // namespace nmt::data
