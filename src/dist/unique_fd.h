#pragma once
// A file descriptor that closes itself: the launcher's pipes, sockets and /dev/null.

#include <unistd.h>

#include <utility>

namespace nmt::dist {

/// Owns a file descriptor (-1: none) and closes it on destruction or reset.
class UniqueFd {
 public:
  /// Takes ownership of fd.
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  /// The descriptor, still owned (-1 when none).
  int get() const { return fd_; }
  /// Closes the descriptor now.
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

}  // namespace nmt::dist
