#include "train/stop_signal.h"

#include <atomic>
#include <csignal>
#include <string>

#include "dist/key_value_store.h"
#include "dist/store_values.h"

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
