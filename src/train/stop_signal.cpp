#include "train/stop_signal.h"

#include <atomic>
#include <csignal>

namespace nmt::train {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_stop_signal(int signal_number) {
  g_stop.store(true);
  // A second signal ends the process the default way.
  std::signal(signal_number, SIG_DFL);
}

}  // namespace

void install_stop_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

bool stop_requested() { return g_stop.load(); }

}  // namespace nmt::train
