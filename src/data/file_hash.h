#pragma once
// Content hashes of files, for cache keys and fingerprints.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace nmt::data {

/// Incremental 64-bit FNV-1a over bytes; stable across runs and machines.
class Fnv1a64 {
 public:
  void update(const void* data, size_t size);
  void update(std::string_view text) { update(text.data(), text.size()); }
  template <class T>
  void update_value(const T& value) {
    update(&value, sizeof(value));
  }
  uint64_t digest() const { return state_; }

 private:
  uint64_t state_ = 1469598103934665603ull;
};

/// FNV-1a 64 of a file's bytes; throws DataError when it cannot be read.
uint64_t hash_file(const std::filesystem::path& file);
/// hash_file as 16 hex digits.
std::string hash_file_hex(const std::filesystem::path& file);

}  // namespace nmt::data
