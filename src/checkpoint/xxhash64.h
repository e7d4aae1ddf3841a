#pragma once
// XXH64 (seed 0), the 64-bit xxHash: the checksum of a checkpoint's data section and the
// parameter hash of nmt-ckpt. Chosen for speed (several GB/s, far above FNV-1a's ~1 GB/s, so
// hashing never dominates a save or load) and because it is a published, stable algorithm
// that other tools (e.g. Python's xxhash) can recompute.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nmt::checkpoint {

/// Incremental XXH64 with seed 0: update() in any pieces gives the digest of their
/// concatenation.
class XxHash64 {
 public:
  /// Hashes size more bytes.
  void update(const void* data, size_t size);
  /// Hashes the bytes of text.
  void update(std::string_view text) { update(text.data(), text.size()); }
  /// Digest of all bytes so far; update() may continue afterwards.
  uint64_t digest() const;

 private:
  void consume_stripe(const unsigned char* stripe);

  // The four lanes start from seed 0 as the XXH64 specification sets them (prime1 + prime2,
  // prime2, 0, -prime1).
  uint64_t acc_[4] = {0x9E3779B185EBCA87ull + 0xC2B2AE3D27D4EB4Full, 0xC2B2AE3D27D4EB4Full, 0,
                      0 - 0x9E3779B185EBCA87ull};
  uint64_t total_ = 0;             ///< bytes hashed so far
  unsigned char buffer_[32] = {};  ///< bytes of a stripe not yet complete
  size_t buffered_ = 0;            ///< valid bytes in buffer_
};

/// value as 16 lower-case hex digits.
std::string hex64(uint64_t value);

}  // namespace nmt::checkpoint
