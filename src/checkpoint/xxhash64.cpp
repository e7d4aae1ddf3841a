#include "checkpoint/xxhash64.h"

#include <cstring>

#include <fmt/format.h>

namespace nmt::checkpoint {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "XXH64 reads words little-endian; this code loads them natively");

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ull;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ull;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

inline uint64_t read64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline uint32_t read32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline uint64_t round(uint64_t acc, uint64_t input) {
  acc += input * kPrime2;
  acc = rotl(acc, 31);
  return acc * kPrime1;
}

inline uint64_t merge_round(uint64_t h, uint64_t acc) {
  h ^= round(0, acc);
  return h * kPrime1 + kPrime4;
}

}  // namespace

void XxHash64::consume_stripe(const unsigned char* stripe) {
  acc_[0] = round(acc_[0], read64(stripe));
  acc_[1] = round(acc_[1], read64(stripe + 8));
  acc_[2] = round(acc_[2], read64(stripe + 16));
  acc_[3] = round(acc_[3], read64(stripe + 24));
}

void XxHash64::update(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  total_ += size;
  if (buffered_ + size < sizeof(buffer_)) {
    if (size > 0) std::memcpy(buffer_ + buffered_, p, size);
    buffered_ += size;
    return;
  }
  if (buffered_ > 0) {
    const size_t fill = sizeof(buffer_) - buffered_;
    std::memcpy(buffer_ + buffered_, p, fill);
    consume_stripe(buffer_);
    p += fill;
    size -= fill;
    buffered_ = 0;
  }
  // The hot loop: four independent lanes per 32-byte stripe.
  uint64_t a0 = acc_[0], a1 = acc_[1], a2 = acc_[2], a3 = acc_[3];
  while (size >= 32) {
    a0 = round(a0, read64(p));
    a1 = round(a1, read64(p + 8));
    a2 = round(a2, read64(p + 16));
    a3 = round(a3, read64(p + 24));
    p += 32;
    size -= 32;
  }
  acc_[0] = a0, acc_[1] = a1, acc_[2] = a2, acc_[3] = a3;
  if (size > 0) std::memcpy(buffer_, p, size);
  buffered_ = size;
}

uint64_t XxHash64::digest() const {
  uint64_t h;
  if (total_ >= 32) {
    h = rotl(acc_[0], 1) + rotl(acc_[1], 7) + rotl(acc_[2], 12) + rotl(acc_[3], 18);
    for (const uint64_t acc : acc_) h = merge_round(h, acc);
  } else {
    h = kPrime5;  // + seed, which is 0
  }
  h += total_;
  const unsigned char* p = buffer_;
  const unsigned char* end = buffer_ + buffered_;
  for (; p + 8 <= end; p += 8) {
    h ^= round(0, read64(p));
    h = rotl(h, 27) * kPrime1 + kPrime4;
  }
  if (p + 4 <= end) {
    h ^= static_cast<uint64_t>(read32(p)) * kPrime1;
    h = rotl(h, 23) * kPrime2 + kPrime3;
    p += 4;
  }
  for (; p < end; ++p) {
    h ^= (*p) * kPrime5;
    h = rotl(h, 11) * kPrime1;
  }
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

std::string hex64(uint64_t value) { return fmt::format("{:016x}", value); }

}  // namespace nmt::checkpoint
