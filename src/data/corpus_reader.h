#pragma once
// Reading aligned parallel text: one sentence per line, source and target files line by line
// in step; gzip-compressed files are read transparently. Bad input is an error naming the
// file and line, or a counted skip, never silence.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "data/data_options.h"

namespace nmt::data {

/// Reads a text file (plain or gzip) line by line.
class LineReader {
 public:
  /// Opens path; throws DataError when it cannot be read.
  explicit LineReader(std::filesystem::path path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  /// Reads the next line without its "\n" (and a "\r" before it); false at end of file.
  bool next(std::string* line);
  /// 1-based number of the line last returned by next().
  int64_t line_number() const { return line_number_; }
  const std::filesystem::path& path() const { return path_; }
  /// The share of the file read so far, in [0, 1] (of its compressed bytes when gzip'd).
  double fraction_read() const;

 private:
  bool fill();

  std::filesystem::path path_;
  void* file_ = nullptr;  // gzFile; kept opaque so zlib stays out of this header
  std::vector<char> buffer_;
  size_t begin_ = 0;
  size_t end_ = 0;
  bool eof_ = false;
  int64_t line_number_ = 0;
  double file_bytes_ = 0;
};

/// How many line pairs were read and why some were left out.
struct FilterCounts {
  int64_t read = 0;          ///< line pairs read
  int64_t empty = 0;         ///< source or target empty (or only whitespace)
  int64_t invalid_utf8 = 0;  ///< skipped for invalid UTF-8 (with data.invalid_utf8: skip)
  int64_t too_long = 0;      ///< source or target longer than data.max_len tokens
  int64_t length_ratio = 0;  ///< long/short token ratio above data.max_len_ratio
  /// Pairs kept: read minus every filtered pair.
  int64_t kept() const { return read - empty - invalid_utf8 - too_long - length_ratio; }
};

/// Receives one aligned, valid, non-empty pair with its 1-based line number.
using PairVisitor =
    std::function<void(int64_t line_number, std::string_view src, std::string_view tgt)>;

/// Receives the share of the source file read so far, in [0, 1].
using ReadProgress = std::function<void(double fraction_read)>;

/// Reads src and tgt in step and calls visit for each pair that is valid UTF-8 and non-empty,
/// counting the others in counts; calls `progress`, when given, every kProgressPairs pairs.
/// Throws DataError when the files have different line counts (naming both files and both
/// counts) and, with InvalidUtf8Policy::kError, on the first invalid line (naming file, line
/// and byte column).
void read_parallel(const std::filesystem::path& src, const std::filesystem::path& tgt,
                   InvalidUtf8Policy invalid_utf8, const PairVisitor& visit,
                   FilterCounts* counts, const ReadProgress& progress = {});

/// Pairs between two calls of read_parallel's progress.
constexpr int64_t kProgressPairs = 1 << 16;

}  // namespace nmt::data
