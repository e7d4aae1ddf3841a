#include "data/corpus_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "util/utf8.h"
#include "util/error.h"

namespace nmt::data {
namespace {

constexpr size_t kBufferBytes = 1 << 20;

bool is_blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f'; });
}

}  // namespace

LineReader::LineReader(std::filesystem::path path) : path_(std::move(path)) {
  std::error_code ec;
  NMT_CHECK(std::filesystem::is_regular_file(path_, ec), DataError, "{}: no such file",
            path_.string());
  // gzopen reads uncompressed files transparently, so one code path serves both.
  file_ = gzopen(path_.c_str(), "rb");
  NMT_CHECK(file_ != nullptr, DataError, "{}: cannot open: {}", path_.string(),
            std::strerror(errno));
  gzbuffer(static_cast<gzFile>(file_), kBufferBytes);
  buffer_.resize(kBufferBytes);
  file_bytes_ = static_cast<double>(std::filesystem::file_size(path_, ec));
}

double LineReader::fraction_read() const {
  if (file_bytes_ <= 0) return eof_ ? 1.0 : 0.0;
  const double offset = static_cast<double>(gzoffset(static_cast<gzFile>(file_)));
  return std::clamp(offset / file_bytes_, 0.0, 1.0);
}

LineReader::~LineReader() {
  if (file_) gzclose(static_cast<gzFile>(file_));
}

bool LineReader::fill() {
  // Keep the unread tail, then append what the file gives.
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == buffer_.size()) buffer_.resize(buffer_.size() * 2);  // a very long line
  const int n = gzread(static_cast<gzFile>(file_), buffer_.data() + end_,
                       static_cast<unsigned>(buffer_.size() - end_));
  if (n < 0) {
    int code = 0;
    const char* message = gzerror(static_cast<gzFile>(file_), &code);
    NMT_THROW(DataError, "{}: read error after line {}: {}", path_.string(), line_number_,
              message ? message : "unknown");
  }
  if (n == 0) eof_ = true;
  end_ += static_cast<size_t>(n);
  return n > 0;
}

bool LineReader::next(std::string* line) {
  for (;;) {
    const char* start = buffer_.data() + begin_;
    const void* newline = std::memchr(start, '\n', end_ - begin_);
    if (newline || (eof_ && begin_ < end_)) {
      const size_t length =
          newline ? static_cast<const char*>(newline) - start : end_ - begin_;
      size_t kept = length;
      if (kept > 0 && start[kept - 1] == '\r') --kept;
      line->assign(start, kept);
      begin_ += newline ? length + 1 : length;
      ++line_number_;
      return true;
    }
    if (eof_) return false;
    fill();
  }
}

void read_parallel(const std::filesystem::path& src, const std::filesystem::path& tgt,
                   InvalidUtf8Policy invalid_utf8, const PairVisitor& visit,
                   FilterCounts* counts, const ReadProgress& progress) {
  LineReader src_reader(src);
  LineReader tgt_reader(tgt);
  std::string src_line, tgt_line;
  for (;;) {
    const bool has_src = src_reader.next(&src_line);
    const bool has_tgt = tgt_reader.next(&tgt_line);
    if (!has_src || !has_tgt) {
      if (has_src == has_tgt) break;
      // Count the rest of the longer file so the message gives both totals.
      LineReader& longer = has_src ? src_reader : tgt_reader;
      std::string rest;
      while (longer.next(&rest)) {
      }
      NMT_THROW(DataError, "parallel files differ in line count: {} has {} lines, {} has {}",
                src.string(), src_reader.line_number(), tgt.string(), tgt_reader.line_number());
    }
    ++counts->read;
    if (progress && counts->read % kProgressPairs == 0) progress(src_reader.fraction_read());
    bool valid = true;
    for (const LineReader* reader : {&src_reader, &tgt_reader}) {
      const std::string& line = reader == &src_reader ? src_line : tgt_line;
      const size_t bad = find_invalid_utf8(line);
      if (bad == std::string_view::npos) continue;
      NMT_CHECK(invalid_utf8 == InvalidUtf8Policy::kSkip, DataError,
                "{}:{}: invalid UTF-8 at byte {} (set data.invalid_utf8: skip to count and skip "
                "such lines)",
                reader->path().string(), reader->line_number(), bad + 1);
      valid = false;
    }
    if (!valid) {
      ++counts->invalid_utf8;
      continue;
    }
    if (is_blank(src_line) || is_blank(tgt_line)) {
      ++counts->empty;
      continue;
    }
    visit(src_reader.line_number(), src_line, tgt_line);
  }
}

}  // namespace nmt::data
