#pragma once
// The project's one content hash for keys and fingerprints (token-cache keys, vocabulary
// fingerprints, config hashes): 64-bit FNV-1a, stable across runs, machines and builds.
// (Checkpoint checksums use XXH64, which the checkpoint format defines: checkpoint/xxhash64.h.)

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nmt {

/// splitmix64: a fast, well-mixed hash of 64-bit values, identical on every platform (batch
/// plans and corpus draws: every rank must compute the same).
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Incremental 64-bit FNV-1a over bytes.
class Fnv1a64 {
 public:
  void update(const void* data, size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    uint64_t h = state_;
    for (size_t i = 0; i < size; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
    state_ = h;
  }
  void update(std::string_view text) { update(text.data(), text.size()); }
  template <class T>
  void update_value(const T& value) {
    update(&value, sizeof(value));
  }
  uint64_t digest() const { return state_; }
  /// The digest as 16 lowercase hex digits.
  std::string hex() const {
    static const char kDigits[] = "0123456789abcdef";
    std::string out(16, '0');
    for (int i = 0; i < 16; ++i) out[15 - i] = kDigits[(state_ >> (4 * i)) & 0xF];
    return out;
  }

 private:
  uint64_t state_ = 1469598103934665603ull;
};

}  // namespace nmt
