#include "util/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "util/error.h"

namespace nmt {
namespace {

constexpr std::string_view kTempMarker = ".tmp-";
// Writes at least this large skip the buffer: copying them would cost more than the syscall.
constexpr size_t kDirectWriteBytes = 256 << 10;
constexpr size_t kBufferBytes = 1 << 20;

}  // namespace

std::filesystem::path temp_path_for(const std::filesystem::path& target) {
  // "out/" names the folder out: its temp is "out.tmp-<pid>" beside it, not "out/.tmp-<pid>"
  // inside it, which replacing the folder would delete with it.
  std::filesystem::path temp = target;
  while (!temp.has_filename() && temp.has_relative_path()) temp = temp.parent_path();
  temp += std::string(kTempMarker) + std::to_string(::getpid());
  return temp;
}

bool is_temp_file_name(std::string_view file_name) { return temp_file_pid(file_name).has_value(); }

std::optional<int64_t> temp_file_pid(std::string_view file_name) {
  const size_t marker = file_name.rfind(kTempMarker);
  if (marker == std::string_view::npos || marker == 0) return std::nullopt;
  const std::string_view pid = file_name.substr(marker + kTempMarker.size());
  if (pid.empty() || pid.size() > 18) return std::nullopt;
  int64_t value = 0;
  for (const char c : pid) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

bool other_process_alive(int64_t pid) {
  // kill(pid, 0) probes without signalling: EPERM is a live process of another user.
  return pid != ::getpid() && pid > 0 && pid <= INT32_MAX &&
         (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

std::vector<std::filesystem::path> remove_dead_temps(
    const std::filesystem::path& folder, const std::function<bool(std::string_view)>& is_ours) {
  std::vector<std::filesystem::path> candidates, removed;  // listed first: removing changes it
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    const auto pid = temp_file_pid(name);
    if (!pid || !is_ours(std::string_view(name).substr(0, name.rfind(kTempMarker)))) continue;
    if (!other_process_alive(*pid)) candidates.push_back(entry.path());
  }
  for (const auto& path : candidates) {
    std::error_code remove_error;
    if (std::filesystem::remove(path, remove_error)) removed.push_back(path);
  }
  return removed;
}

void write_file_atomically(const std::filesystem::path& target, std::string_view contents) {
  AtomicFileWriter writer(target);
  writer.write(contents.data(), contents.size());
  writer.commit();
}

AtomicFileWriter::AtomicFileWriter(std::filesystem::path target)
    : AtomicFileWriter(target, temp_path_for(target)) {}

AtomicFileWriter::AtomicFileWriter(std::filesystem::path target, std::filesystem::path temp)
    : target_(std::move(target)), temp_(std::move(temp)) {
  // O_TRUNC: a temp file of this pid can only be a leftover of an earlier failed attempt.
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    NMT_THROW(CheckpointError, "{}: cannot create {}: {}", target_.string(), temp_.string(),
              std::strerror(errno));
  }
  // The file it replaces keeps its permissions (a metrics file made group-readable stays so).
  struct stat existing {};
  if (::stat(target_.c_str(), &existing) == 0 && ::fchmod(fd_, existing.st_mode & 07777) != 0)
    fail("cannot set the permissions of", errno);
  buffer_.reserve(kBufferBytes);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (committed_) return;
  if (fd_ >= 0) ::close(fd_);
  ::unlink(temp_.c_str());
}

void AtomicFileWriter::fail(std::string_view step, int error) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temp_.c_str());
  committed_ = true;  // nothing left for the destructor to clean up
  NMT_THROW(CheckpointError, "{}: {} {}: {}; nothing was replaced", target_.string(), step,
            temp_.string(), std::strerror(error));
}

void AtomicFileWriter::write_fully(const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", errno);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicFileWriter::flush_buffer() {
  if (buffer_.empty()) return;
  write_fully(buffer_.data(), buffer_.size());
  buffer_.clear();
}

void AtomicFileWriter::write(const void* data, size_t size) {
  NMT_CHECK(fd_ >= 0 && !committed_, CheckpointError, "{}: write after commit or failure",
            target_.string());
  if (size >= kDirectWriteBytes) {
    flush_buffer();
    write_fully(data, size);
    return;
  }
  if (buffer_.size() + size > kBufferBytes) flush_buffer();
  const auto* p = static_cast<const char*>(data);
  buffer_.insert(buffer_.end(), p, p + size);
}

void AtomicFileWriter::commit() {
  NMT_CHECK(fd_ >= 0 && !committed_, CheckpointError, "{}: commit after commit or failure",
            target_.string());
  flush_buffer();
  if (::fsync(fd_) != 0) fail("cannot fsync", errno);
  const int fd = fd_;
  fd_ = -1;
  // close() can report a deferred write error (e.g. on NFS); that file must not be renamed.
  if (::close(fd) != 0) fail("cannot close", errno);
  if (::rename(temp_.c_str(), target_.c_str()) != 0) fail("cannot rename", errno);
  committed_ = true;
  // Persist the rename itself. Filesystems that cannot fsync a folder say EINVAL; the rename
  // is then as durable as that filesystem makes it, which is all we can do.
  std::filesystem::path folder = target_.parent_path();
  if (folder.empty()) folder = ".";
  const int dir_fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    NMT_THROW(CheckpointError, "{}: written, but cannot open its folder to fsync it: {}",
              target_.string(), std::strerror(errno));
  }
  const int sync_result = ::fsync(dir_fd);
  const int sync_error = errno;
  ::close(dir_fd);
  if (sync_result != 0 && sync_error != EINVAL) {
    NMT_THROW(CheckpointError, "{}: written, but fsync of its folder failed: {}", target_.string(),
              std::strerror(sync_error));
  }
}

}  // namespace nmt
