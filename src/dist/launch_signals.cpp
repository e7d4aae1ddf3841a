#include "dist/launch_signals.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "util/error.h"

namespace nmt::dist {
namespace {

/// Write end of the self-pipe through which signal handlers wake the poll loop.
volatile sig_atomic_t g_signal_fd = -1;

void on_signal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  if (g_signal_fd >= 0) (void)!::write(g_signal_fd, &byte, 1);
  errno = saved;
}

}  // namespace

std::string signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGKILL: return "SIGKILL";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    default: return fmt::format("signal {}", sig);
  }
}

SignalScope::SignalScope() {
  int fds[2];
  NMT_CHECK(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0, DistError, "launch: pipe2 failed: {}",
            std::strerror(errno));
  read_ = UniqueFd(fds[0]);
  write_ = UniqueFd(fds[1]);
  g_signal_fd = write_.get();
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, &old_int_);
  ::sigaction(SIGTERM, &action, &old_term_);
  action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  ::sigaction(SIGCHLD, &action, &old_chld_);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, &old_pipe_);
}

SignalScope::~SignalScope() {
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
  ::sigaction(SIGCHLD, &old_chld_, nullptr);
  ::sigaction(SIGPIPE, &old_pipe_, nullptr);
  g_signal_fd = -1;
}

std::vector<int> SignalScope::take() {
  std::vector<int> signals;
  unsigned char buffer[64];
  ssize_t n;
  while ((n = ::read(read_.get(), buffer, sizeof buffer)) > 0)
    for (ssize_t i = 0; i < n; ++i)
      if (buffer[i] != SIGCHLD) signals.push_back(buffer[i]);
  return signals;
}

}  // namespace nmt::dist
