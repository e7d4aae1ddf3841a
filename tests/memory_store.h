#pragma once
// An in-memory KeyValueStore, shared by "ranks" that are threads or plain calls of one test:
// the protocols over the job's store (progress marks, the stop agreement) are tested with it
// without a rendezvous.

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "dist/key_value_store.h"

namespace nmt::test {

/// Keys and values in a map, under a mutex (set_once is atomic, as the real store's is).
class MemoryStore final : public dist::KeyValueStore {
 public:
  void set(const std::string& key, const std::string& value) override {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = value;
  }
  std::optional<std::string> get_if_set(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = values_.find(key);
    if (it == values_.end()) return std::nullopt;
    return it->second;
  }
  std::string set_once(const std::string& key, const std::string& value) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return values_.emplace(key, value).first->second;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::string> values_;
};

}  // namespace nmt::test
