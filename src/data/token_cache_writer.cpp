#include "data/token_cache_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "data/token_cache_format.h"
#include "util/error.h"
#include "util/host_name.h"

namespace nmt::data {
namespace {

namespace format = token_cache_format;

constexpr size_t kPartBuffer = 1 << 20;

void write_fd(int fd, const void* data, size_t bytes, const std::filesystem::path& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    NMT_CHECK(n > 0, DataError, "{}: write failed: {}", path.string(), std::strerror(errno));
    p += n, bytes -= static_cast<size_t>(n);
  }
}

/// Appends the first `bytes` of `from` to `to`: copy_file_range (in the kernel, no copy
/// through this process's memory), or read and write where the file system cannot.
void append_file(const std::filesystem::path& from, uint64_t bytes, int to,
                 const std::filesystem::path& to_path) {
  const int in = ::open(from.c_str(), O_RDONLY);
  NMT_CHECK(in >= 0, DataError, "{}: cannot open: {}", from.string(), std::strerror(errno));
  try {
    uint64_t left = bytes;
    while (left > 0) {
      const ssize_t n = ::copy_file_range(in, nullptr, to, nullptr, left, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // not supported here (or a short file, checked below): plain copy
      left -= static_cast<uint64_t>(n);
    }
    std::vector<char> buffer;
    while (left > 0) {
      if (buffer.empty()) buffer.resize(kPartBuffer);
      const ssize_t n = ::read(in, buffer.data(), std::min<uint64_t>(left, buffer.size()));
      if (n < 0 && errno == EINTR) continue;
      NMT_CHECK(n > 0, DataError, "{}: read failed after {} of {} bytes: {}", from.string(),
                bytes - left, bytes, n < 0 ? std::strerror(errno) : "end of file");
      write_fd(to, buffer.data(), static_cast<size_t>(n), to_path);
      left -= static_cast<uint64_t>(n);
    }
  } catch (...) {
    ::close(in);
    throw;
  }
  ::close(in);
}

}  // namespace

std::string token_cache_temp_suffix() {
  return fmt::format(".tmp-{}-{}", host_name().value_or("localhost"), static_cast<long>(::getpid()));
}

TokenCacheWriter::TokenCacheWriter(std::filesystem::path file, uint64_t key, int id_bytes)
    : file_(std::move(file)), key_(key), id_bytes_(id_bytes) {
  NMT_CHECK(id_bytes == 2 || id_bytes == 4, DataError,
            "token cache ids: expected 2 or 4 bytes, found {}", id_bytes);
  static const char* const kNames[kParts] = {"src-offsets", "tgt-offsets", "lines", "src-ids",
                                             "tgt-ids"};
  try {
    for (int i = 0; i < kParts; ++i) {
      Part& part = parts_[i];
      part.path = file_.string() + token_cache_temp_suffix() + "." + kNames[i];
      part.file = std::fopen(part.path.c_str(), "wb");
      NMT_CHECK(part.file != nullptr, DataError, "{}: cannot create: {}", part.path.string(),
                std::strerror(errno));
      std::setvbuf(part.file, nullptr, _IOFBF, kPartBuffer);
    }
    const uint64_t zero = 0;
    write(parts_[kSrcOffsets], &zero, 8);
    write(parts_[kTgtOffsets], &zero, 8);
  } catch (...) {
    remove_parts();
    throw;
  }
}

TokenCacheWriter::~TokenCacheWriter() {
  if (!finished_) remove_parts();
}

void TokenCacheWriter::remove_parts() {
  for (Part& part : parts_) {
    if (part.file) std::fclose(part.file);
    part.file = nullptr;
    std::error_code ignored;
    if (!part.path.empty()) std::filesystem::remove(part.path, ignored);
  }
}

void TokenCacheWriter::write(Part& part, const void* data, size_t bytes) {
  NMT_CHECK(std::fwrite(data, 1, bytes, part.file) == bytes, DataError, "{}: write failed: {}",
            part.path.string(), std::strerror(errno));
  part.bytes += bytes;
}

void TokenCacheWriter::write_ids(Part& part, const int32_t* ids, size_t count) {
  if (id_bytes_ == 4) return write(part, ids, count * 4);
  narrow_.resize(count * 2);
  for (size_t k = 0; k < count; ++k) {
    const auto id = static_cast<uint16_t>(ids[k]);
    std::memcpy(&narrow_[2 * k], &id, 2);
  }
  write(part, narrow_.data(), narrow_.size());
}

void TokenCacheWriter::add(int64_t line, const int32_t* src, size_t src_count, const int32_t* tgt,
                           size_t tgt_count) {
  write_ids(parts_[kSrcIds], src, src_count);
  write_ids(parts_[kTgtIds], tgt, tgt_count);
  src_ids_ += src_count;
  tgt_ids_ += tgt_count;
  write(parts_[kSrcOffsets], &src_ids_, 8);
  write(parts_[kTgtOffsets], &tgt_ids_, 8);
  const auto line_number = static_cast<uint64_t>(line);
  write(parts_[kLines], &line_number, 8);
  ++pairs_;
}

void TokenCacheWriter::finish(const FilterCounts& counts) {
  for (Part& part : parts_) {
    NMT_CHECK(std::fclose(part.file) == 0, DataError, "{}: write failed: {}", part.path.string(),
              std::strerror(errno));
    part.file = nullptr;
  }
  format::Header h{};
  std::memcpy(h.magic, format::kMagic, sizeof(format::kMagic));
  h.version = format::kFormatVersion;
  h.id_bytes = static_cast<uint32_t>(id_bytes_);
  h.key = key_;
  h.pairs = pairs_;
  h.src_ids = src_ids_;
  h.tgt_ids = tgt_ids_;
  h.read = counts.read, h.empty = counts.empty, h.invalid_utf8 = counts.invalid_utf8;
  h.too_long = counts.too_long, h.length_ratio = counts.length_ratio;
  const std::filesystem::path tmp = file_.string() + token_cache_temp_suffix();
  const int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
  NMT_CHECK(out >= 0, DataError, "{}: cannot create: {}", tmp.string(), std::strerror(errno));
  try {
    write_fd(out, &h, sizeof(h), tmp);
    static const char zeros[8] = {};
    for (const Part& part : parts_) {
      append_file(part.path, part.bytes, out, tmp);
      write_fd(out, zeros, format::padded8(part.bytes) - part.bytes, tmp);
    }
    NMT_CHECK(::fsync(out) == 0, DataError, "{}: write failed: {}", tmp.string(),
              std::strerror(errno));
  } catch (...) {
    ::close(out);
    std::filesystem::remove(tmp);
    remove_parts();
    throw;
  }
  ::close(out);
  remove_parts();
  std::filesystem::rename(tmp, file_);
  finished_ = true;
}

}  // namespace nmt::data
