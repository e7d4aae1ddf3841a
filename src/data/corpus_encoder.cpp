#include "data/corpus_encoder.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "data/token_cache_writer.h"

namespace nmt::data {
namespace {

/// Pairs as read, in corpus order.
struct RawChunk {
  uint64_t index = 0;  ///< position among the chunks
  std::vector<std::string> src, tgt;
  std::vector<int64_t> lines;
  size_t text_bytes = 0;  ///< of src and tgt
};

/// The pairs of a chunk that passed the filters, their ids flattened.
struct EncodedChunk {
  std::vector<int32_t> src_ids, tgt_ids;
  std::vector<size_t> src_ends, tgt_ends;  ///< end of pair i's ids
  std::vector<int64_t> lines;
  FilterCounts counts;  ///< only the filters applied after encoding
};

EncodedChunk encode_chunk(const RawChunk& raw, const Vocabularies& vocab,
                          const DataOptions& options, const std::vector<int32_t>& prefix,
                          const std::vector<int32_t>& tgt_prefix) {
  EncodedChunk out;
  const auto tags = static_cast<int64_t>(prefix.size());
  const auto tgt_tags = static_cast<int64_t>(tgt_prefix.size());
  for (size_t i = 0; i < raw.src.size(); ++i) {
    const std::vector<int32_t> src = vocab.src.encode(raw.src[i]);
    const std::vector<int32_t> tgt = vocab.tgt.encode(raw.tgt[i]);
    const auto s = static_cast<int64_t>(src.size());
    const auto t = static_cast<int64_t>(tgt.size());
    if (s == 0 || t == 0) {  // text that encodes to nothing (e.g. only control characters)
      ++out.counts.empty;
      continue;
    }
    if (s + tags > options.max_len || t + tgt_tags > options.max_len) {
      ++out.counts.too_long;
      continue;
    }
    // Ratio with EOS counted, so 1-piece vs 3-piece pairs are not thrown out as misaligned.
    const double ratio = double(std::max(s, t) + 1) / double(std::min(s, t) + 1);
    if (ratio > options.max_len_ratio) {
      ++out.counts.length_ratio;
      continue;
    }
    out.src_ids.insert(out.src_ids.end(), prefix.begin(), prefix.end());
    out.src_ids.insert(out.src_ids.end(), src.begin(), src.end());
    out.tgt_ids.insert(out.tgt_ids.end(), tgt_prefix.begin(), tgt_prefix.end());
    out.tgt_ids.insert(out.tgt_ids.end(), tgt.begin(), tgt.end());
    out.src_ends.push_back(out.src_ids.size());
    out.tgt_ends.push_back(out.tgt_ids.size());
    out.lines.push_back(raw.lines[i]);
  }
  return out;
}

/// Workers that encode chunks and write them in order. The worker that finishes the chunk
/// next in line writes it, and any after it already done; one writes at a time.
class OrderedEncoder {
 public:
  OrderedEncoder(const CorpusEncoderOptions& corpus, const Vocabularies& vocab,
                 const DataOptions& options, TokenCacheWriter& writer)
      : corpus_(corpus),
        vocab_(vocab),
        options_(options),
        writer_(writer),
        max_in_flight_(2 * static_cast<size_t>(std::max(1, corpus.threads)) + 1) {
    for (int i = 0; i < std::max(1, corpus.threads); ++i) workers_.emplace_back([this] { work(); });
  }
  ~OrderedEncoder() {
    if (!workers_.empty()) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        closing_ = true;
        if (!error_) error_ = std::make_exception_ptr(std::runtime_error("abandoned"));
      }
      work_ready_.notify_all();
      for (auto& t : workers_) t.join();
    }
  }

  /// Queues a chunk, waiting while too many, or too many bytes, are in flight (one chunk
  /// always may be); rethrows a worker's error.
  void submit(RawChunk chunk) {
    std::unique_lock<std::mutex> lock(mutex_);
    space_ready_.wait(lock, [this, &chunk] {
      return error_ || submitted_ == written_ ||
             (submitted_ - written_ < max_in_flight_ &&
              bytes_in_flight_ + chunk.text_bytes <= corpus_.max_bytes_in_flight);
    });
    if (error_) std::rethrow_exception(error_);
    chunk.index = submitted_++;
    bytes_in_flight_ += chunk.text_bytes;
    bytes_of_.emplace(chunk.index, chunk.text_bytes);
    if (corpus_.peak_bytes_in_flight)
      *corpus_.peak_bytes_in_flight = std::max(*corpus_.peak_bytes_in_flight, bytes_in_flight_);
    queue_.push_back(std::move(chunk));
    work_ready_.notify_one();
  }

  /// Waits for every chunk to be written; returns the counts of the filters after encoding.
  FilterCounts finish() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closing_ = true;
    }
    work_ready_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
    if (error_) std::rethrow_exception(error_);
    return counts_;
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      work_ready_.wait(lock, [this] { return closing_ || error_ || !queue_.empty(); });
      if (error_ || queue_.empty()) return;  // closing with nothing left, or failed
      RawChunk raw = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      bool this_writes = false;
      try {
        EncodedChunk encoded =
            encode_chunk(raw, vocab_, options_, corpus_.src_prefix, corpus_.tgt_prefix);
        lock.lock();
        done_.emplace(raw.index, std::move(encoded));
        if (writing_) continue;  // the writer takes it in turn
        writing_ = this_writes = true;
        for (auto next = done_.find(written_); next != done_.end(); next = done_.find(written_)) {
          EncodedChunk chunk = std::move(next->second);
          done_.erase(next);
          lock.unlock();
          write(chunk);
          lock.lock();
          const auto bytes = bytes_of_.find(written_);
          bytes_in_flight_ -= bytes->second;
          bytes_of_.erase(bytes);
          ++written_;
          space_ready_.notify_all();
        }
        writing_ = this_writes = false;
      } catch (...) {
        if (!lock.owns_lock()) lock.lock();
        if (this_writes) writing_ = false;
        if (!error_) error_ = std::current_exception();
        space_ready_.notify_all();
        work_ready_.notify_all();
        return;
      }
    }
  }

  /// Only the writing worker calls this (writing_ set), so counts_ needs no lock.
  void write(const EncodedChunk& chunk) {
    size_t src_begin = 0, tgt_begin = 0;
    for (size_t i = 0; i < chunk.lines.size(); ++i) {
      writer_.add(chunk.lines[i], chunk.src_ids.data() + src_begin, chunk.src_ends[i] - src_begin,
                  chunk.tgt_ids.data() + tgt_begin, chunk.tgt_ends[i] - tgt_begin);
      src_begin = chunk.src_ends[i], tgt_begin = chunk.tgt_ends[i];
    }
    counts_.empty += chunk.counts.empty;
    counts_.too_long += chunk.counts.too_long;
    counts_.length_ratio += chunk.counts.length_ratio;
  }

  const CorpusEncoderOptions& corpus_;
  const Vocabularies& vocab_;
  const DataOptions& options_;
  TokenCacheWriter& writer_;
  const size_t max_in_flight_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_ready_, space_ready_;
  std::deque<RawChunk> queue_;
  std::map<uint64_t, EncodedChunk> done_;
  uint64_t submitted_ = 0, written_ = 0;
  size_t bytes_in_flight_ = 0;         // text bytes of chunks submitted and not written
  std::map<uint64_t, size_t> bytes_of_;  // of each chunk in flight, by index
  bool closing_ = false, writing_ = false;
  std::exception_ptr error_;
  FilterCounts counts_;
};

}  // namespace

FilterCounts encode_corpus(const CorpusEncoderOptions& corpus, const Vocabularies& vocab,
                           const DataOptions& options, TokenCacheWriter& writer,
                           const EncodeProgress& progress) {
  FilterCounts counts;
  double fraction_read = 0;
  OrderedEncoder encoder(corpus, vocab, options, writer);
  RawChunk chunk;
  const size_t chunk_pairs = std::max<size_t>(1, corpus.chunk_pairs);
  // A chunk is cut early when its text reaches a share of the bound, so that a few are in
  // flight even with long lines.
  const size_t chunk_bytes = std::max<size_t>(
      1, corpus.max_bytes_in_flight / (2 * static_cast<size_t>(std::max(1, corpus.threads)) + 1));
  auto submit = [&] {
    encoder.submit(std::move(chunk));
    chunk = RawChunk{};
    if (progress) progress(counts.read, fraction_read);
  };
  read_parallel(
      corpus.src, corpus.tgt, options.invalid_utf8,
      [&](int64_t line, std::string_view s, std::string_view t) {
        chunk.src.emplace_back(s), chunk.tgt.emplace_back(t), chunk.lines.push_back(line);
        chunk.text_bytes += s.size() + t.size();
        if (chunk.src.size() == chunk_pairs || chunk.text_bytes >= chunk_bytes) submit();
      },
      &counts, [&](double fraction) { fraction_read = fraction; });
  if (!chunk.src.empty()) submit();
  const FilterCounts encoded = encoder.finish();
  counts.empty += encoded.empty;
  counts.too_long += encoded.too_long;
  counts.length_ratio += encoded.length_ratio;
  return counts;
}

}  // namespace nmt::data
