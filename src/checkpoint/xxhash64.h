#pragma once
// XXH64 (seed 0), the 64-bit xxHash: the checksum of a checkpoint's data section and the
// parameter hash of nmt-ckpt. Chosen for speed (several GB/s, so hashing never dominates a
// save or load) and because it is a published, stable algorithm that other tools (Python's
// xxhash, `xxh64sum`) recompute. The hashing is libxxhash's (Debian libxxhash-dev); this
// class only gives it the incremental interface the checkpoint code uses.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

struct XXH64_state_s;

namespace nmt::checkpoint {

/// Incremental XXH64 with seed 0: update() in any pieces gives the digest of their
/// concatenation.
class XxHash64 {
 public:
  XxHash64();
  /// Hashes size more bytes.
  void update(const void* data, size_t size);
  /// Hashes the bytes of text.
  void update(std::string_view text) { update(text.data(), text.size()); }
  /// Digest of all bytes so far; update() may continue afterwards.
  uint64_t digest() const;

 private:
  struct FreeState {
    void operator()(XXH64_state_s* state) const;
  };
  std::unique_ptr<XXH64_state_s, FreeState> state_;  ///< libxxhash's streaming state
};

/// value as 16 lower-case hex digits.
std::string hex64(uint64_t value);

}  // namespace nmt::checkpoint
