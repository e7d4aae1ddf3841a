#pragma once
// The token cache's file layout, shared by its reader (token_cache.h), its writer
// (token_cache_writer.h) and tests that write a file by hand (a sparse one past 2^32 tokens).
//
// Layout (native little-endian): Header; uint64 src_offsets[pairs + 1];
// uint64 tgt_offsets[pairs + 1]; uint64 line_numbers[pairs]; src ids; tgt ids (each id array
// padded to 8 bytes, ids 16-bit when the vocabulary allows, else 32-bit). Every offset and
// count is 64-bit: a corpus of 200M pairs holds about 10 billion tokens.

#include <cstdint>

namespace nmt::data::token_cache_format {

inline constexpr char kMagic[8] = {'N', 'M', 'T', 'T', 'O', 'K', '\0', '\1'};
inline constexpr uint32_t kFormatVersion = 1;

/// The first bytes of a cache file.
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t id_bytes;  ///< 2 or 4
  uint64_t key;       ///< token_cache_key of what it was built from
  uint64_t pairs;     ///< pairs kept
  uint64_t src_ids;   ///< source ids over all pairs
  uint64_t tgt_ids;   ///< target ids over all pairs
  int64_t read, empty, invalid_utf8, too_long, length_ratio;  ///< FilterCounts
  uint64_t reserved[4];
};
static_assert(sizeof(Header) % 8 == 0, "header keeps the arrays 8-byte aligned");

/// `bytes` rounded up to a multiple of 8.
inline uint64_t padded8(uint64_t bytes) { return (bytes + 7) / 8 * 8; }

/// The size of a whole cache file with this header.
inline uint64_t expected_file_size(const Header& h) {
  return sizeof(Header) + 8 * (2 * (h.pairs + 1) + h.pairs) + padded8(h.src_ids * h.id_bytes) +
         padded8(h.tgt_ids * h.id_bytes);
}

}  // namespace nmt::data::token_cache_format
