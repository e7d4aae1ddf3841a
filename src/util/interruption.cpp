#include "util/interruption.h"

#include <signal.h>

#include <atomic>

#include "util/error.h"
#include "util/log.h"

namespace nmt {
namespace {

std::atomic<int> g_pending{0};
int g_depth = 0;  // scopes alive; the outermost installs and restores (one thread makes them)
struct sigaction g_old_int {
}, g_old_term{};

/// The two signals a scope notes, by name (sigabbrev_np needs glibc 2.32).
const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

void note_signal(int sig) {
  int expected = 0;
  if (!g_pending.compare_exchange_strong(expected, sig)) {
    // The second: end now, the default way (sigaction and raise are async-signal-safe).
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    ::sigaction(sig, &fallback, nullptr);
    ::raise(sig);
  }
}

}  // namespace

InterruptionScope::InterruptionScope() {
  if (g_depth++ > 0) return;
  g_pending = 0;
  struct sigaction action {};
  action.sa_handler = note_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  // A signal the process ignores (SIGINT of a shell's background job) stays ignored.
  ::sigaction(SIGINT, nullptr, &g_old_int);
  ::sigaction(SIGTERM, nullptr, &g_old_term);
  if (g_old_int.sa_handler != SIG_IGN) ::sigaction(SIGINT, &action, nullptr);
  if (g_old_term.sa_handler != SIG_IGN) ::sigaction(SIGTERM, &action, nullptr);
}

InterruptionScope::~InterruptionScope() {
  if (--g_depth > 0) return;
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  const int sig = g_pending.exchange(0);
  if (sig == 0) return;
  log::warn("run", "stopped by {} (temporary files removed)", signal_name(sig));
  ::raise(sig);
}

int pending_interruption() { return g_pending.load(); }

void check_interruption(std::string_view what) {
  const int sig = g_pending.load();
  if (sig != 0) NMT_THROW(Error, "interrupted by {} while {}", signal_name(sig), what);
}

}  // namespace nmt
