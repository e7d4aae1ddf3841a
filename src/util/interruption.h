#pragma once
// Ctrl-C (SIGINT) or SIGTERM during work that leaves files behind when killed (encoding a
// token cache streams gigabytes into temporary files): while an InterruptionScope lives, the
// signal is noted instead of ending the process, the work polls it where it can stop cleanly
// (check_interruption throws; unwinding removes the temporary files), and when the scope ends
// the noted signal is raised again under the dispositions from before the scope, so the
// process then ends, or a later handler sees it, as it would have. A second signal within the
// scope ends the process at once, the default way.
//
//   { InterruptionScope scope;   // e.g. around data preparation
//     ... check_interruption("encoding train"); ... }   // the signal is re-raised here

#include <string_view>

namespace nmt {

/// SIGINT and SIGTERM noted while alive (one that the process ignores stays ignored). Scopes
/// nest; the outermost installs the handlers. Made and destroyed on one thread.
class InterruptionScope {
 public:
  InterruptionScope();
  /// Restores the earlier handlers; re-raises a noted signal (with a warning saying so).
  ~InterruptionScope();
  InterruptionScope(const InterruptionScope&) = delete;
  InterruptionScope& operator=(const InterruptionScope&) = delete;
};

/// The signal noted in the current scope, or 0.
int pending_interruption();

/// Throws Error ("interrupted by SIGINT while <what>") when a signal was noted.
void check_interruption(std::string_view what);

}  // namespace nmt
