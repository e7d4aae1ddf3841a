#include "data/token_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <regex>
#include <string>

#include "data/corpus_encoder.h"
#include "data/file_hash.h"
#include "data/token_cache_format.h"
#include "data/token_cache_writer.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/file_lock.h"
#include "util/hash.h"
#include "util/host_name.h"
#include "util/interruption.h"
#include "util/log.h"
#include "util/phase_progress.h"
#include "util/timer.h"

namespace nmt::data {
namespace {

namespace format = token_cache_format;
using format::expected_file_size;
using format::Header;
using format::kFormatVersion;
using format::kMagic;
using format::padded8;

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
            DataError, "{}: not a token cache of format version {}", file.string(), kFormatVersion);
  NMT_CHECK(h->id_bytes == 2 || h->id_bytes == 4, DataError, "{}: bad id width {}", file.string(),
            h->id_bytes);
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
  NMT_CHECK(
      cache.src_offsets_[h->pairs] == h->src_ids && cache.tgt_offsets_[h->pairs] == h->tgt_ids,
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
  // The inputs' contents (XXH3), remembered in the cache folder by size and modification
  // time: the launcher reads a corpus once, its ranks, restarts and resumes not again.
  key.update_value(hash_file_remembered(request.src, request.dir));
  key.update_value(hash_file_remembered(request.tgt, request.dir));
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

std::string token_cache_file_name(std::string_view corpus, uint64_t key) {
  return fmt::format("{}.{:016x}.tok", corpus, key);
}

bool is_token_cache_of(std::string_view file_name, std::string_view corpus) {
  constexpr std::string_view kSuffix = ".tok";
  constexpr size_t kKeyDigits = 16;
  if (file_name.size() != corpus.size() + 1 + kKeyDigits + kSuffix.size()) return false;
  if (file_name.substr(0, corpus.size()) != corpus || file_name[corpus.size()] != '.') return false;
  if (file_name.substr(file_name.size() - kSuffix.size()) != kSuffix) return false;
  const std::string_view key = file_name.substr(corpus.size() + 1, kKeyDigits);
  return std::all_of(key.begin(), key.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::vector<std::filesystem::path> remove_dead_cache_temps(const std::filesystem::path& dir,
                                                           std::string_view corpus,
                                                           bool sole_builder) {
  constexpr std::string_view kMarker = ".tmp-";
  const std::string host = host_name().value_or("localhost");
  const auto now = std::filesystem::file_time_type::clock::now();
  std::vector<std::filesystem::path> dead, removed;  // listed first: removing changes it
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    const size_t marker = name.find(kMarker);
    // Only files our writer names: never a folder or a link, whatever its name.
    if (marker == std::string::npos || !is_token_cache_of(name.substr(0, marker), corpus) ||
        !entry.is_regular_file() || entry.is_symlink())
      continue;
    // "<host>-<pid>" or "<host>-<pid>.<part>" (host names hold '-' and '.', parts '-').
    static const std::regex kOwner(R"(^(.*)-([0-9]{1,9})(\.[a-z-]+)?$)");
    std::smatch owner;
    const std::string rest = name.substr(marker + kMarker.size());
    if (std::regex_match(rest, owner, kOwner) && owner[1].str() == host) {
      // This host's: its pid tells (this process's own are an earlier attempt's: it is called
      // before this process writes any).
      if (other_process_alive(std::stoll(owner[2].str()))) continue;
    } else {
      // Another host's (or an unnamed writer's): only the lock holder may judge, and only by
      // age, since on a file system whose locks are each host's own (Lustre's localflock, NFS
      // with local_lock) another host may hold "the" lock too and be writing it now.
      std::error_code time_error;
      const auto written = std::filesystem::last_write_time(entry.path(), time_error);
      if (!sole_builder || time_error || now - written < kStaleCacheTempAge) continue;
    }
    dead.push_back(entry.path());
  }
  for (const auto& path : dead) {
    std::error_code remove_error;
    if (std::filesystem::remove(path, remove_error)) removed.push_back(path);
  }
  return removed;
}

namespace {

/// The cache file when it exists and opens; nullopt when it must be built.
std::optional<TokenCache> open_if_built(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file)) return std::nullopt;
  try {
    return TokenCache::open(file);
  } catch (const DataError& e) {
    log::warn("data", "rebuilding the token cache: {}", e.what());
    return std::nullopt;
  }
}

}  // namespace

TokenCacheResult build_or_open_token_cache(const TokenCacheRequest& request,
                                           const Vocabularies& vocab, const DataOptions& options) {
  const uint64_t key = token_cache_key(request, vocab, options);
  const std::filesystem::path file = request.dir / token_cache_file_name(request.name, key);
  TokenCacheResult result;
  if (std::optional<TokenCache> built = open_if_built(file)) {
    result.cache = std::move(*built);
    return result;
  }
  std::filesystem::create_directories(request.dir);
  // Ctrl-C or SIGTERM (a time limit) from here on stops the wait or the encoding where it can
  // clean up (the writer's destructor removes its temporary files), then ends the process as
  // the signal would have (util/interruption.h).
  const InterruptionScope interruptible;
  // One builder per cache on the file system that holds it: the launchers of nodes that share
  // it, or the ranks of a node under torchrun or Slurm, would otherwise encode it at once.
  // The others wait, then open what it wrote.
  const std::filesystem::path lock_file = request.dir / (request.name + ".lock");
  bool said = false;
  const FileLock lock = FileLock::wait_for(lock_file, [&] {
    check_interruption("waiting for the token cache " + file.string());
    if (!said)
      log::info("data", "{}: another process is building it (lock {}); waiting for it",
                file.string(), lock_file.string());
    said = true;
  });
  if (std::optional<TokenCache> built = open_if_built(file)) {
    result.cache = std::move(*built);
    return result;
  }
  // What an earlier builder left when it was killed (a time limit, an OOM kill): up to twice
  // the cache's size. This host's dead pids' go; holding the lock, so do other hosts' that
  // nobody has written for kStaleCacheTempAge.
  for (const auto& path : remove_dead_cache_temps(request.dir, request.name, lock.held()))
    log::info("data", "removed {}, left by a build that did not finish", path.string());
  log::info("data", "encoding {} / {} into {}", request.src.string(), request.tgt.string(),
            file.string());
  const auto start = std::chrono::steady_clock::now();
  // A line every 10 s with the rate and an ETA (from the share of the source file read): on
  // millions of pairs encoding takes minutes. prepare.cpp logs the closing figures.
  log::PhaseProgress progress("data", "encoding " + request.name, "pairs");
  const int id_bytes = std::max(vocab.src.size(), vocab.tgt.size()) <= 65536 ? 2 : 4;
  TokenCacheWriter writer(file, key, id_bytes);
  const FilterCounts counts =
      encode_corpus({request.src, request.tgt, request.src_prefix, request.tgt_prefix,
                     request.threads, request.chunk_pairs},
                    vocab, options, writer, [&progress, &request](int64_t read, double fraction) {
                      // Stopped here, the writer's destructor removes the temporary files.
                      check_interruption("encoding " + request.name);
                      progress.update(double(read), fraction);
                    });
  NMT_CHECK(writer.pairs() > 0, DataError,
            "{} / {}: no sentence pair left after filtering ({} read, {} empty, {} invalid "
            "UTF-8, {} longer than data.max_len, {} over data.max_len_ratio)",
            request.src.string(), request.tgt.string(), counts.read, counts.empty,
            counts.invalid_utf8, counts.too_long, counts.length_ratio);
  result.encode_seconds = seconds_since(start);
  const auto write_start = std::chrono::steady_clock::now();
  writer.finish(counts);
  result.write_seconds = seconds_since(write_start);
  // Caches of this corpus made with other inputs or settings are stale now.
  for (const auto& entry : std::filesystem::directory_iterator(request.dir)) {
    if (entry.path() != file && is_token_cache_of(entry.path().filename().string(), request.name)) {
      std::error_code ignored;
      std::filesystem::remove(entry.path(), ignored);
    }
  }
  result.cache = TokenCache::open(file);
  result.built = true;
  return result;
}

}  // namespace nmt::data
