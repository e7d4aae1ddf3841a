#pragma once
// One run per run directory: an advisory lock (flock) on <run_dir>/.lock, held for the run's
// life by the process that owns the directory (the built-in launcher, or rank 0 of an outside
// launcher's job). A second nmt-train on the same directory (a double submission, a Slurm
// requeue while the old job lives) is refused, naming the holder's host and pid, instead of
// setting the live run's checkpoints aside and deleting its files through retention.
//
// The lock is the kernel's, not the file's: it goes with the holder's process (a crash, a
// SIGKILL, a lost node's lease on NFS), so a stale .lock file never blocks a later run. The
// file's text only says who holds it. On a file system that has no flock (some Lustre and
// FUSE mounts say ENOLCK or EOPNOTSUPP) the run goes on unlocked, with a warning.
//
//   RunDirLock lock = RunDirLock::acquire(run_dir);   // throws ConfigError when held

#include <filesystem>
#include <optional>
#include <string>

#include "util/file_lock.h"

namespace nmt {

/// The lock file's name in a run directory.
inline constexpr const char* kRunDirLockName = ".lock";

/// A held lock on a run directory; released when destroyed (or when the process ends).
class RunDirLock {
 public:
  /// Creates run_dir when missing and takes its lock without waiting. Throws ConfigError
  /// naming the directory and the holder ("host node7, pid 4242, since ...") when another
  /// process holds it; a file system without flock gives an unlocked RunDirLock and a warning.
  static RunDirLock acquire(const std::filesystem::path& run_dir);
  /// Who holds the lock of run_dir now ("host H, pid P, since T"), or nullopt when nobody
  /// does (or the file system cannot tell).
  static std::optional<std::string> holder(const std::filesystem::path& run_dir);

  /// False on a file system without flock: nothing is held.
  bool held() const { return lock_.held(); }
  /// The lock file's descriptor (-1 when nothing is held), for processes that are to share
  /// the lock (the built-in launcher's workers keep it across exec).
  int fd() const { return lock_.held() ? lock_.fd() : -1; }

 private:
  explicit RunDirLock(FileLock lock) : lock_(std::move(lock)) {}
  FileLock lock_;
};

}  // namespace nmt
