#pragma once
// A caching allocator for CPU tensors. A training step allocates and frees the same large
// tensors every time (activations, logits, gradients); the system allocator hands blocks that
// large to mmap and back to the kernel on every free, so each step page-faults its whole
// working set in again (without this cache, about a third of a tiny CPU step's time goes to the
// kernel: docs/performance-log.md).
// Kept for reuse instead, they cost nothing after the first step, as on the GPU, where
// LibTorch's CUDA caching allocator does the same.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace nmt::dist {

struct HostAllocatorOptions {
  size_t min_cached_bytes = size_t{1} << 20;  ///< smaller blocks go to the system allocator (bytes)
  size_t max_cached_bytes = 0;  ///< free blocks kept at most (bytes); 0: default_host_cache_bytes
  int local_workers = 1;        ///< processes on this machine that each cache (for the default)
};

/// The memory this process may use (bytes): physical RAM, or the limit of its cgroup when that
/// is lower (v2 memory.max or v1 memory.limit_in_bytes, of its own cgroup or of the mount's
/// root, as containers show it). `proc_self_cgroup` is the text of /proc/self/cgroup.
int64_t memory_limit_bytes(const std::string& proc_self_cgroup,
                           const std::filesystem::path& cgroup_root, int64_t physical_bytes);
/// memory_limit_bytes of this process (/proc/self/cgroup, /sys/fs/cgroup, sysconf).
int64_t memory_limit_bytes();
/// The default cap of cached free blocks: a quarter of `memory_limit`, shared by the
/// `local_workers` processes that cache on the machine (1 GiB when the limit is unknown).
size_t default_host_cache_bytes(int64_t memory_limit, int local_workers);

/// What the allocator has done so far.
struct HostAllocatorStats {
  int64_t reused = 0;         ///< large allocations served from the cache
  int64_t fresh = 0;          ///< large allocations taken from the system
  int64_t cached_bytes = 0;   ///< free blocks held now
  int64_t in_use_bytes = 0;   ///< large blocks handed out now
  int64_t peak_in_use_bytes = 0;  ///< most in_use_bytes since install or reset_peak
};

/// Makes the caching allocator LibTorch's CPU allocator for this process (idempotent: a
/// second call changes nothing). Blocks of at least min_cached_bytes are kept when freed and
/// handed out again for requests of up to 25% less; beyond max_cached_bytes of free blocks,
/// the largest are returned to the system.
void install_caching_host_allocator(const HostAllocatorOptions& options = {});

/// The installed allocator's counts (zeros when it is not installed).
HostAllocatorStats host_allocator_stats();
/// True once install_caching_host_allocator has run.
bool host_allocator_installed();
/// Restarts peak_in_use_bytes from in_use_bytes (as torch.cuda.reset_peak_memory_stats).
void reset_host_allocator_peak();

}  // namespace nmt::dist
