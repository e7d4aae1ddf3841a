#pragma once
// An advisory lock (flock) on a file, held while the FileLock lives or until the process ends
// (a crash or SIGKILL frees it: the kernel's lock goes with its holder, a stale file does
// not block). Locks of one file system's processes exclude each other, across hosts where the
// file system passes flock on (NFSv4, and CephFS, GPFS, Lustre mounted with flock); a file
// system that cannot lock (ENOLCK, EOPNOTSUPP) is reported as such, for the caller to decide.
//
//   FileLock lock = FileLock::try_lock(file);          // kHeld, kBusy or kUnsupported
//   FileLock built = FileLock::wait_for(file, poll);   // waits, polling `poll` (may throw)

#include <filesystem>
#include <functional>

namespace nmt {

/// One lock on one file.
class FileLock {
 public:
  /// What an attempt found.
  enum class State {
    kHeld,         ///< this object holds the lock
    kBusy,         ///< another holder has it (try_lock only)
    kUnsupported,  ///< the file system cannot lock: nothing is held
  };

  /// Opens (creates) file and takes its exclusive lock without waiting. Throws Error naming
  /// the file when it cannot be opened.
  static FileLock try_lock(const std::filesystem::path& file);
  /// Takes the lock, waiting for another holder: `poll` is called about every 200 ms while it
  /// waits (first after the first failed attempt), so a caller can log once or throw on an
  /// interruption. Never kBusy.
  static FileLock wait_for(const std::filesystem::path& file, const std::function<void()>& poll);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

  State state() const { return state_; }
  bool held() const { return state_ == State::kHeld; }
  /// The open lock file, held or busy (to write or read the holder's text); -1 when the file
  /// system cannot lock.
  int fd() const { return fd_; }
  /// The errno of kUnsupported (0 otherwise), for messages.
  int error() const { return error_; }

 private:
  FileLock(int fd, State state, int error) : fd_(fd), state_(state), error_(error) {}
  int fd_ = -1;
  State state_ = State::kUnsupported;
  int error_ = 0;
};

}  // namespace nmt
