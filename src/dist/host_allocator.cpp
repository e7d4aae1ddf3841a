#include "dist/host_allocator.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

namespace nmt::dist {
namespace {

constexpr size_t kAlignment = 64;         // as c10's CPU allocator (AVX-512 loads)
constexpr size_t kGranularity = 1 << 16;  // sizes are rounded up to 64 KiB

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
    // The context is the pointer itself ("simple" data pointers), so that raw_allocate and
    // raw_deallocate, which some kernels use for scratch space, work too.
    void* ptr = n < options_.min_cached_bytes ? system_->raw_allocate(n) : take_or_fresh(n);
    return {ptr, ptr, &release, c10::Device(c10::kCPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  HostAllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_in_use_bytes = stats_.in_use_bytes;
  }

  static CachingHostAllocator* instance;

 private:
  /// A cached block of at least n bytes (the smallest, at most 25% larger) or a fresh one.
  void* take_or_fresh(size_t n) {
    const size_t size = (n + kGranularity - 1) / kGranularity * kGranularity;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.lower_bound(size);
      if (it != free_.end() && it->first <= size + size / 4) {
        void* ptr = it->second;
        in_use_.emplace(ptr, it->first);
        stats_.cached_bytes -= static_cast<int64_t>(it->first);
        stats_.in_use_bytes += static_cast<int64_t>(it->first);
        stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
        ++stats_.reused;
        free_.erase(it);
        return ptr;
      }
    }
    void* ptr = std::aligned_alloc(kAlignment, size);
    if (ptr == nullptr) {
      // The cache may hold what the system lacks: give it all back and try once more.
      trim(0);
      ptr = std::aligned_alloc(kAlignment, size);
    }
    TORCH_CHECK_WITH(OutOfMemoryError, ptr != nullptr, "host memory: cannot allocate ", size,
                     " bytes");
    std::lock_guard<std::mutex> lock(mutex_);
    in_use_.emplace(ptr, size);
    stats_.in_use_bytes += static_cast<int64_t>(size);
    stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
    ++stats_.fresh;
    return ptr;
  }

  static void release(void* ptr) {
    if (ptr != nullptr) instance->put(ptr);
  }

  /// Caches a block of ours; hands any other pointer back to the system allocator.
  void put(void* ptr) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = in_use_.find(ptr);
      if (it != in_use_.end()) {
        free_.emplace(it->second, ptr);
        stats_.cached_bytes += static_cast<int64_t>(it->second);
        stats_.in_use_bytes -= static_cast<int64_t>(it->second);
        in_use_.erase(it);
        trim_locked(options_.max_cached_bytes);
        return;
      }
    }
    system_->raw_deallocate(ptr);
  }

  /// Frees the largest cached blocks until at most `limit` bytes are cached.
  void trim(size_t limit) {
    std::lock_guard<std::mutex> lock(mutex_);
    trim_locked(limit);
  }
  void trim_locked(size_t limit) {
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
  std::multimap<size_t, void*> free_;            ///< free blocks by size
  std::unordered_map<void*, size_t> in_use_;     ///< handed-out blocks and their sizes
  HostAllocatorStats stats_;
};

CachingHostAllocator* CachingHostAllocator::instance = nullptr;

std::once_flag g_installed;

}  // namespace

void install_caching_host_allocator(const HostAllocatorOptions& options) {
  std::call_once(g_installed, [&] {
    // Never destroyed: tensors freed during static destruction still find it.
    CachingHostAllocator::instance =
        new CachingHostAllocator(c10::GetDefaultCPUAllocator(), options);
    // Priority above the default's, so that nothing replaces it by accident.
    c10::SetCPUAllocator(CachingHostAllocator::instance, /*priority=*/1);
  });
}

HostAllocatorStats host_allocator_stats() {
  return CachingHostAllocator::instance ? CachingHostAllocator::instance->stats()
                                        : HostAllocatorStats{};
}

bool host_allocator_installed() { return CachingHostAllocator::instance != nullptr; }

void reset_host_allocator_peak() {
  if (CachingHostAllocator::instance) CachingHostAllocator::instance->reset_peak();
}

}  // namespace nmt::dist
