#include "dist/host_allocator.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <sstream>
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
    if (options_.max_cached_bytes == 0)
      options_.max_cached_bytes = default_host_cache_bytes(memory_limit_bytes(), options_.local_workers);
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

/// A cgroup memory limit file's value; nullopt when absent, unlimited ("max", or v1's
/// near-2^63 "no limit") or unreadable.
std::optional<int64_t> read_limit(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || value == 0 || value >= (1ull << 62)) return std::nullopt;
  return static_cast<int64_t>(value);
}


}  // namespace

int64_t memory_limit_bytes(const std::string& proc_self_cgroup,
                           const std::filesystem::path& cgroup_root, int64_t physical_bytes) {
  int64_t limit = physical_bytes;
  const auto lower = [&limit](std::optional<int64_t> v) {
    if (v && (limit <= 0 || *v < limit)) limit = *v;
  };
  std::istringstream lines(proc_self_cgroup);
  for (std::string line; std::getline(lines, line);) {
    // "0::/path" (v2) or "4:memory:/path" (v1); the path may not exist under a container's
    // mount, whose root is the container's own cgroup: both places are read.
    const size_t first = line.find(':');
    const size_t second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    const std::filesystem::path relative = std::filesystem::path(path).relative_path();
    if (controllers.empty()) {
      lower(read_limit(cgroup_root / relative / "memory.max"));
      lower(read_limit(cgroup_root / "memory.max"));
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      lower(read_limit(cgroup_root / "memory" / relative / "memory.limit_in_bytes"));
      lower(read_limit(cgroup_root / "memory" / "memory.limit_in_bytes"));
    }
  }
  return limit;
}

int64_t memory_limit_bytes() {
  std::ifstream in("/proc/self/cgroup");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  const int64_t physical = pages > 0 && page > 0 ? int64_t{pages} * int64_t{page} : 0;
  return memory_limit_bytes(text, "/sys/fs/cgroup", physical);
}

size_t default_host_cache_bytes(int64_t memory_limit, int local_workers) {
  if (memory_limit <= 0) return size_t{1} << 30;
  return static_cast<size_t>(memory_limit / 4 / std::max(1, local_workers));
}

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
