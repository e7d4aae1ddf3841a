#pragma once
// The launcher's signal handling: SIGINT/SIGTERM/SIGCHLD wake its poll loop through a
// self-pipe. Torch-free, like the rest of the launcher (launcher.h).

#include <signal.h>

#include <string>
#include <vector>

#include "dist/unique_fd.h"

namespace nmt::dist {

/// "SIGTERM", "SIGSEGV", ... for the common signals, else "signal N".
std::string signal_name(int sig);

/// While alive: SIGINT/SIGTERM/SIGCHLD wake the poll loop through a self-pipe and SIGPIPE is
/// ignored (a closed stdout must not kill the launcher and orphan the workers). Restores the
/// previous dispositions on destruction. One at a time per process.
class SignalScope {
 public:
  /// Installs the handlers; throws DistError when the pipe cannot be made.
  SignalScope();
  ~SignalScope();
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

  /// The read end of the self-pipe, to poll.
  int fd() const { return read_.get(); }
  /// The SIGINT/SIGTERM received since the last call, oldest first (SIGCHLD only wakes).
  std::vector<int> take();

 private:
  UniqueFd read_, write_;
  struct sigaction old_int_ {}, old_term_ {}, old_chld_ {}, old_pipe_ {};
};

}  // namespace nmt::dist
