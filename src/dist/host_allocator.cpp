#include "dist/host_allocator.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

namespace nmt::dist {
namespace {

constexpr size_t kAlignment = 64;         // as c10's CPU allocator (AVX-512 loads)
constexpr size_t kGranularity = 1 << 16;  // sizes are rounded up to 64 KiB

class CachingHostAllocator;

/// What a handed-out block's DataPtr carries to its deleter.
struct Block {
  void* ptr;
  size_t size;
  CachingHostAllocator* owner;
};

class CachingHostAllocator final : public c10::Allocator {
 public:
  CachingHostAllocator(c10::Allocator* system, HostAllocatorOptions options)
      : system_(system), options_(options) {
    if (options_.max_cached_bytes == 0) {
      const long pages = ::sysconf(_SC_PHYS_PAGES);
      const long page = ::sysconf(_SC_PAGE_SIZE);
      options_.max_cached_bytes =
          pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) / 4
                                : size_t{1} << 30;
    }
  }

  c10::DataPtr allocate(size_t n) override {
    if (n < options_.min_cached_bytes) return system_->allocate(n);
    const size_t size = (n + kGranularity - 1) / kGranularity * kGranularity;
    Block* block = take(size);
    if (block == nullptr) block = fresh(size);
    return {block->ptr, block, &release, c10::Device(c10::kCPU)};
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  HostAllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

 private:
  /// The smallest free block of at least `size` bytes and at most 25% more, or null.
  Block* take(size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.lower_bound(size);
    if (it == free_.end() || it->first > size + size / 4) return nullptr;
    Block* block = new Block{it->second, it->first, this};
    free_.erase(it);
    stats_.cached_bytes -= static_cast<int64_t>(block->size);
    stats_.in_use_bytes += static_cast<int64_t>(block->size);
    ++stats_.reused;
    return block;
  }

  Block* fresh(size_t size) {
    void* ptr = std::aligned_alloc(kAlignment, size);
    if (ptr == nullptr) {
      // The cache may hold what the system lacks: give it all back and try once more.
      trim(0);
      ptr = std::aligned_alloc(kAlignment, size);
    }
    TORCH_CHECK_WITH(OutOfMemoryError, ptr != nullptr, "host memory: cannot allocate ", size,
                     " bytes");
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.in_use_bytes += static_cast<int64_t>(size);
    ++stats_.fresh;
    return new Block{ptr, size, this};
  }

  static void release(void* context) {
    Block* block = static_cast<Block*>(context);
    block->owner->put(block->ptr, block->size);
    delete block;
  }

  void put(void* ptr, size_t size) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      free_.emplace(size, ptr);
      stats_.cached_bytes += static_cast<int64_t>(size);
      stats_.in_use_bytes -= static_cast<int64_t>(size);
    }
    trim(options_.max_cached_bytes);
  }

  /// Frees the largest cached blocks until at most `limit` bytes are cached.
  void trim(size_t limit) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!free_.empty() && static_cast<size_t>(stats_.cached_bytes) > limit) {
      auto largest = std::prev(free_.end());
      std::free(largest->second);
      stats_.cached_bytes -= static_cast<int64_t>(largest->first);
      free_.erase(largest);
    }
  }

  c10::Allocator* system_;
  HostAllocatorOptions options_;
  std::mutex mutex_;
  std::multimap<size_t, void*> free_;  ///< free blocks by size
  HostAllocatorStats stats_;
};

CachingHostAllocator* g_allocator = nullptr;
std::once_flag g_installed;

}  // namespace

void install_caching_host_allocator(const HostAllocatorOptions& options) {
  std::call_once(g_installed, [&] {
    // Never destroyed: tensors freed during static destruction still find it.
    g_allocator = new CachingHostAllocator(c10::GetDefaultCPUAllocator(), options);
    // Priority above the default's, so that nothing replaces it by accident.
    c10::SetCPUAllocator(g_allocator, /*priority=*/1);
  });
}

HostAllocatorStats host_allocator_stats() {
  return g_allocator ? g_allocator->stats() : HostAllocatorStats{};
}

}  // namespace nmt::dist
