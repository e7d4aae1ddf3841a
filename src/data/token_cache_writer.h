#pragma once
// Writes a token cache (token_cache_format.h) as encoded pairs arrive, holding nothing that
// grows with the corpus: the five arrays stream to temporary files beside the cache, and
// finish() joins them behind the header (the pair count is known only at the end) with an
// in-kernel copy, then renames the result into place, so the cache is never seen half
// written. Memory stays a few buffers whatever the corpus size; the file is byte-identical to
// one written from arrays held in memory.
//
//   TokenCacheWriter writer(file, key, id_bytes);
//   for (...) writer.add(line, src_ids, src_count, tgt_ids, tgt_count);
//   writer.finish(counts);  // <file> now exists; without finish() the destructor cleans up

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "data/corpus_reader.h"

namespace nmt::data {

/// ".tmp-<host>-<pid>": what the writer's temporary files add to the cache's name (then
/// ".<part>" for the parts). The host tells the builders on nodes that share a file system
/// apart (containers' pids repeat).
std::string token_cache_temp_suffix();

/// Streams pairs into a new token cache file.
class TokenCacheWriter {
 public:
  /// Creates the temporary files next to `file`; ids are stored in `id_bytes` (2 or 4) bytes.
  TokenCacheWriter(std::filesystem::path file, uint64_t key, int id_bytes);
  ~TokenCacheWriter();
  TokenCacheWriter(const TokenCacheWriter&) = delete;
  TokenCacheWriter& operator=(const TokenCacheWriter&) = delete;

  /// Appends a pair: its 1-based corpus line and its ids (the source's with its tags).
  void add(int64_t line, const int32_t* src, size_t src_count, const int32_t* tgt,
           size_t tgt_count);
  /// Pairs added so far.
  int64_t pairs() const { return static_cast<int64_t>(pairs_); }
  /// Writes <file> from the parts (fsync'd, renamed into place) and removes the parts.
  void finish(const FilterCounts& counts);

 private:
  /// One array of the layout, streamed to its own temporary file.
  struct Part {
    std::filesystem::path path;
    FILE* file = nullptr;
    uint64_t bytes = 0;
  };
  void write(Part& part, const void* data, size_t bytes);
  void write_ids(Part& part, const int32_t* ids, size_t count);
  void remove_parts();

  std::filesystem::path file_;
  uint64_t key_;
  int id_bytes_;
  uint64_t pairs_ = 0, src_ids_ = 0, tgt_ids_ = 0;
  enum { kSrcOffsets, kTgtOffsets, kLines, kSrcIds, kTgtIds, kParts };
  Part parts_[kParts];
  std::string narrow_;  // 16-bit ids of one add(), reused
  bool finished_ = false;
};

}  // namespace nmt::data
