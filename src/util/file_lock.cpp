#include "util/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "util/error.h"

namespace nmt {
namespace {

/// Errors of flock on a file system that does not support it.
bool flock_unsupported(int error) {
  return error == ENOLCK || error == EOPNOTSUPP || error == ENOSYS || error == EINVAL;
}

}  // namespace

FileLock FileLock::try_lock(const std::filesystem::path& file) {
  // O_CLOEXEC: a process the holder starts must not keep the lock after the holder ends.
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  NMT_CHECK(fd >= 0, Error, "{}: cannot open the lock file: {}", file.string(),
            std::strerror(errno));
  int result;
  do {
    result = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (result != 0 && errno == EINTR);
  if (result == 0) return FileLock(fd, State::kHeld, 0);
  const int error = errno;
  if (error == EWOULDBLOCK) return FileLock(fd, State::kBusy, 0);  // kept open: holder's text
  ::close(fd);
  NMT_CHECK(flock_unsupported(error), Error, "{}: cannot lock: {}", file.string(),
            std::strerror(error));
  return FileLock(-1, State::kUnsupported, error);
}

FileLock FileLock::wait_for(const std::filesystem::path& file, const std::function<void()>& poll) {
  for (;;) {
    FileLock lock = try_lock(file);
    if (lock.state() != State::kBusy) return lock;
    if (poll) poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

FileLock::FileLock(FileLock&& other) noexcept
    : fd_(other.fd_), state_(other.state_), error_(other.error_) {
  other.fd_ = -1;
  other.state_ = State::kUnsupported;
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    state_ = other.state_;
    error_ = other.error_;
    other.fd_ = -1;
    other.state_ = State::kUnsupported;
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace nmt
