#include "util/interruption.h"

#include <signal.h>
#include <string.h>

#include <atomic>

#include "util/error.h"
#include "util/log.h"

namespace nmt {
namespace {

std::atomic<int> g_pending{0};
int g_depth = 0;  // scopes alive; the outermost installs and restores
struct sigaction g_old_int {
}, g_old_term{};

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
  ::sigaction(SIGINT, &action, &g_old_int);
  ::sigaction(SIGTERM, &action, &g_old_term);
}

InterruptionScope::~InterruptionScope() {
  if (--g_depth > 0) return;
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  const int sig = g_pending.exchange(0);
  if (sig == 0) return;
  log::warn("run", "stopped by SIG{} (temporary files removed)", ::sigabbrev_np(sig));
  ::raise(sig);
}

int pending_interruption() { return g_pending.load(); }

void check_interruption(std::string_view what) {
  const int sig = g_pending.load();
  if (sig != 0) NMT_THROW(Error, "interrupted by SIG{} while {}", ::sigabbrev_np(sig), what);
}

}  // namespace nmt
