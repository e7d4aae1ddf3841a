#pragma once
// Encoding a corpus into a token cache on every core, in bounded memory: the calling thread
// reads and validates pairs (corpus_reader.h) into chunks; `threads` workers encode and filter
// chunks as they come; finished chunks are handed to the TokenCacheWriter strictly in input
// order, so the cache is byte-identical whatever the thread count. At most a few chunks per
// worker, and at most max_bytes_in_flight of text, are in flight, so memory does not grow with
// the corpus or the thread count, and nothing is cached by
// sentence text (each line is encoded, however often it repeats).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>

#include "data/corpus_reader.h"
#include "data/data_options.h"
#include "data/vocab.h"

namespace nmt::data {

class TokenCacheWriter;

/// What to encode, and how.
struct CorpusEncoderOptions {
  std::filesystem::path src;        ///< source text file
  std::filesystem::path tgt;        ///< target text file
  std::vector<int32_t> src_prefix;  ///< ids put first in every source sentence (its tags)
  std::vector<int32_t> tgt_prefix;  ///< ids put first in every target sentence (M2M100, NLLB)
  int threads = 1;                  ///< encoding workers (the reader is one more thread)
  size_t chunk_pairs = 16384;       ///< pairs per chunk handed to a worker
  /// Text bytes of the chunks read but not yet written, at most (one chunk may exceed it): with
  /// many threads or long lines the chunk count alone let gigabytes sit in memory.
  size_t max_bytes_in_flight = size_t{256} << 20;
  /// When set, receives the most text bytes that were in flight at once.
  size_t* peak_bytes_in_flight = nullptr;
};

/// Receives the pairs read so far and the share of the source file read, after each chunk.
using EncodeProgress = std::function<void(int64_t pairs_read, double fraction_read)>;

/// Reads, validates, encodes and filters (data.max_len, data.max_len_ratio, empty encodings)
/// every pair of the corpus into `writer`, in corpus order; returns what was read and
/// filtered. Throws what reading, encoding or writing throws (the first error of any thread).
FilterCounts encode_corpus(const CorpusEncoderOptions& corpus, const Vocabularies& vocab,
                           const DataOptions& options, TokenCacheWriter& writer,
                           const EncodeProgress& progress = {});

}  // namespace nmt::data
