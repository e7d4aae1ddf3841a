#pragma once
// The encoded corpus, stored once in a compact binary file and memory-mapped: a flat array of
// ids (16-bit when the vocabulary allows, else 32-bit) plus offsets, for source and target.
// The file name carries a hash of the inputs, the filter settings and the SentencePiece
// models, so a restart or a second run reuses it and any change builds a new one.
//
// The layout is in token_cache_format.h (every offset 64-bit); lengths exclude BOS/EOS. It is
// built by streaming (corpus_encoder.h, token_cache_writer.h): memory does not grow with the
// corpus, and the launcher builds it once per node for its ranks, which map it (MAP_SHARED:
// one copy in the page cache however many ranks read it).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/corpus_reader.h"
#include "data/data_options.h"
#include "data/vocab.h"

namespace nmt::data {

/// A memory-mapped token cache.
class TokenCache {
 public:
  /// Maps an existing cache file; throws DataError when it is truncated or not a cache.
  static TokenCache open(const std::filesystem::path& file);

  /// Sentence pairs kept.
  int64_t size() const { return pairs_; }
  /// Source length of pair i, in pieces (no BOS/EOS).
  int64_t src_length(int64_t i) const { return src_offsets_[i + 1] - src_offsets_[i]; }
  /// Target length of pair i, in pieces (no BOS/EOS).
  int64_t tgt_length(int64_t i) const { return tgt_offsets_[i + 1] - tgt_offsets_[i]; }
  /// Source id k of pair i.
  int32_t src_id(int64_t i, int64_t k) const { return id_at(src_ids_, src_offsets_[i] + k); }
  /// Target id k of pair i.
  int32_t tgt_id(int64_t i, int64_t k) const { return id_at(tgt_ids_, tgt_offsets_[i] + k); }
  /// 1-based line of pair i in the corpus files.
  int64_t line_number(int64_t i) const { return static_cast<int64_t>(line_numbers_[i]); }
  /// What was read and filtered when the cache was built.
  const FilterCounts& counts() const { return counts_; }
  /// Total source / target pieces over all pairs.
  int64_t src_tokens() const { return static_cast<int64_t>(src_offsets_[pairs_]); }
  int64_t tgt_tokens() const { return static_cast<int64_t>(tgt_offsets_[pairs_]); }
  const std::filesystem::path& path() const { return path_; }

 private:
  int32_t id_at(const void* ids, uint64_t index) const {
    return id_bytes_ == 2 ? static_cast<const uint16_t*>(ids)[index]
                          : static_cast<const int32_t*>(ids)[index];
  }

  std::shared_ptr<void> mapping_;  // keeps the mmap alive; copies share it
  std::filesystem::path path_;
  int64_t pairs_ = 0;
  int id_bytes_ = 4;
  const uint64_t* src_offsets_ = nullptr;
  const uint64_t* tgt_offsets_ = nullptr;
  const uint64_t* line_numbers_ = nullptr;
  const void* src_ids_ = nullptr;
  const void* tgt_ids_ = nullptr;
  FilterCounts counts_;
};

/// What to encode and where the cache lives.
struct TokenCacheRequest {
  std::string name;           ///< "train", "valid": the file is <dir>/<name>.<key>.tok
  std::filesystem::path src;  ///< source text file
  std::filesystem::path tgt;  ///< target text file
  std::filesystem::path dir;  ///< cache folder (created if needed)
  int threads = 1;            ///< encoding threads
  /// Ids put first in every source sentence (the corpus's tags, data/lang_tags.h); they
  /// count towards data.max_len but not towards the length ratio of a pair.
  std::vector<int32_t> src_prefix;
  /// Ids put first in every target sentence (an M2M100 or NLLB model's target language code,
  /// data/lang_tags.h target_tags); they count towards data.max_len but not the length ratio.
  std::vector<int32_t> tgt_prefix;
  size_t chunk_pairs = 16384;  ///< pairs per chunk given to an encoding thread
};

/// Result of build_or_open_token_cache.
struct TokenCacheResult {
  TokenCache cache;
  bool built = false;         ///< encoded now (false: reused an existing file)
  double encode_seconds = 0;  ///< time spent reading and encoding when built
  double write_seconds = 0;   ///< then joining the streamed parts into the cache file
};

/// The cache key: a hash of both inputs' contents, the vocabularies (as loaded: their
/// encoding_fingerprint) and the filter settings.
uint64_t token_cache_key(const TokenCacheRequest& request, const Vocabularies& vocab,
                         const DataOptions& options);

/// "<corpus>.<key, 16 hex digits>.tok": the file of a corpus's cache under `key`.
std::string token_cache_file_name(std::string_view corpus, uint64_t key);
/// True when `file_name` is a cache file of `corpus` under any key; false for a corpus whose
/// name extends it ("web.v2.<key>.tok" is not "web"'s).
bool is_token_cache_of(std::string_view file_name, std::string_view corpus);

/// A temporary file of another host's cache build unchanged for this long is a dead build's.
inline constexpr std::chrono::hours kStaleCacheTempAge{1};

/// Removes the temporary files that builds of `corpus`'s caches left in dir: those of this
/// host whose process is gone (or is this one: call it before this process writes any) and, when `sole_builder` (this process holds the corpus's build
/// lock), those of other hosts (or of unnamed writers) unchanged for kStaleCacheTempAge (a
/// file system whose flocks are each host's own gives every host "the" lock). Returns them.
std::vector<std::filesystem::path> remove_dead_cache_temps(const std::filesystem::path& dir,
                                                           std::string_view corpus,
                                                           bool sole_builder);

/// Opens the cache for this request, or reads, validates, filters and encodes the corpus
/// into a new one (written to a temporary file and renamed, so it is never seen half written;
/// caches of the same name with another key are removed). One process builds a cache at a
/// time (a lock file "<dir>/<name>.lock"): the others wait and open it. A SIGINT or SIGTERM
/// while it waits or encodes stops it with its temporary files removed, then ends the process
/// as the signal would have (an InterruptionScope, util/interruption.h).
TokenCacheResult build_or_open_token_cache(const TokenCacheRequest& request,
                                           const Vocabularies& vocab, const DataOptions& options);

}  // namespace nmt::data
