#include "train/stop_signal.h"

#include <time.h>

#include <atomic>
#include <cstdint>
#include <csignal>
#include <string>

#include "dist/key_value_store.h"
#include "dist/store_values.h"

namespace nmt::train {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<int64_t> g_first_signal_ns{0};  ///< CLOCK_MONOTONIC of the first signal; 0: none

/// Monotonic nanoseconds, never 0; clock_gettime is async-signal-safe.
int64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec + 1;
}

extern "C" void on_stop_signal(int signal_number) {
  const int64_t now = monotonic_ns();
  int64_t first = 0;
  if (g_first_signal_ns.compare_exchange_strong(first, now)) {
    g_stop.store(true);
    return;
  }
  // The same stop delivered twice (stop_signal.h): nothing more to do.
  if (now - first < static_cast<int64_t>(kRepeatedStopSignalSeconds * 1e9)) return;
  // A second stop, asked for: end the process the default way (the signal is blocked while
  // its handler runs, so it is delivered, with the default action, on return).
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

}  // namespace

void install_stop_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

bool stop_requested() { return g_stop.load(); }

std::optional<int64_t> agreed_stop(dist::KeyValueStore& store, int64_t updates_done,
                                   bool requested) {
  static const std::string kKey = "nmt/stop_after";
  // The first rank that asks sets the key; every later ask reads back the first one's value.
  const std::optional<std::string> value =
      requested ? std::optional<std::string>(store.set_once(kKey, std::to_string(updates_done + 1)))
                : store.get_if_set(kKey);
  if (!value || value->empty()) return std::nullopt;
  return dist::parse_store_integer(-1, kKey, *value, "the update after which every rank stops");
}

}  // namespace nmt::train
