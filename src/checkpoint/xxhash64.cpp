#include "checkpoint/xxhash64.h"

#include <new>

#include <fmt/format.h>
#include <xxhash.h>

namespace nmt::checkpoint {

XxHash64::XxHash64() : state_(XXH64_createState()) {
  if (!state_) throw std::bad_alloc();
  XXH64_reset(state_.get(), 0);
}

void XxHash64::FreeState::operator()(XXH64_state_s* state) const { XXH64_freeState(state); }

void XxHash64::update(const void* data, size_t size) {
  if (size > 0) XXH64_update(state_.get(), data, size);
}

uint64_t XxHash64::digest() const { return XXH64_digest(state_.get()); }

std::string hex64(uint64_t value) { return fmt::format("{:016x}", value); }

}  // namespace nmt::checkpoint
