#pragma once
// The job's rendezvous store as a small key-value service, for the protocols that ranks run
// beside the collectives: where each rank is (progress_marks.h) and when they all stop
// (train/stop_signal.h). Communicator::store() hands it out; the c10d store behind it stays in
// process_group.cpp. Keys are shared by all ranks; values are byte strings.

#include <optional>
#include <string>

namespace nmt::dist {

/// Keys and values every rank of the job sees.
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  /// Sets `key` to `value`.
  virtual void set(const std::string& key, const std::string& value) = 0;
  /// The value of `key`, or nullopt when no rank has set it; does not wait for one.
  virtual std::optional<std::string> get_if_set(const std::string& key) = 0;
  /// Sets `key` to `value` unless a rank has set it already; returns what it then holds (the
  /// first setter's value), atomically over all ranks.
  virtual std::string set_once(const std::string& key, const std::string& value) = 0;
};

}  // namespace nmt::dist
