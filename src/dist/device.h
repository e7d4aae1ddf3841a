#pragma once
// What this machine offers for training: LibTorch build, CUDA devices, NCCL. No torch types
// in this header, so callers need not compile against LibTorch.

#include <exception>
#include <cstdint>
#include <string>
#include <vector>

#include "dist/dist_options.h"
#include "util/cpu_features.h"

namespace nmt::dist {

/// Result of probing LibTorch and the CUDA devices visible to this process.
struct DeviceInfo {
  std::string torch_version;                ///< LibTorch version, e.g. "2.11.0"
  bool cuda_compiled = false;               ///< CUDA/NCCL code paths are compiled in
  std::string cuda_version;                 ///< CUDA version LibTorch was built with, or ""
  std::string nccl_version;                 ///< NCCL version LibTorch links, or ""
  int cuda_devices = 0;                     ///< visible CUDA devices
  std::vector<std::string> device_names;    ///< "NVIDIA H200, 139.8 GiB, sm_90" per device
  std::vector<int> cuda_capabilities;       ///< compute capability per device, major * 10 + minor
  std::string no_cuda_reason;               ///< why cuda_devices is 0, for the user
  int cpu_cores = 0;  ///< CPUs this process may use (affinity, cgroup quota: util/cpu_count.h)
  /// This process's affinity mask is narrower than its cgroup's CPUs: a launcher bound it to
  /// CPUs of its own (util/cpu_count.h cpus_bound_apart).
  bool cpus_bound_apart = false;
  CpuFeatures cpu;                          ///< the CPU's bf16 units (amp.mode auto's input)
};

/// Which collectives a rank uses, and why when it is not what was asked for.
struct BackendChoice {
  bool nccl = false;  ///< NCCL; false: Gloo
  std::string note;   ///< non-empty when auto could not take NCCL on a GPU (for a warning)
};

/// The backend of a rank: `requested` (dist.backend), on a GPU or not, with `local_ranks` ranks
/// on its node sharing `gpus` GPUs. auto is NCCL on a GPU unless ranks share GPUs (NCCL needs
/// one per rank; Gloo also takes CUDA tensors), else Gloo. Throws ConfigError when nccl is
/// asked for where it cannot run, saying why (`no_cuda_reason` without a GPU).
BackendChoice choose_backend(Backend requested, bool on_gpu, int64_t local_ranks, int gpus,
                             const std::string& no_cuda_reason);

/// The plan's line on this node's workers on `gpus` GPUs (> 0) and their backend: "8
/// worker(s), one per GPU, NCCL", "2 worker(s) sharing 1 GPU(s), Gloo", "1 worker(s) on 8
/// GPU(s) (GPU 0 used), Gloo". A backend that choose_backend refuses is named with the reason.
std::string describe_gpu_workers(Backend requested, int64_t workers, int gpus);

/// Ranks of this node on the device of local rank `local_rank`, when `local_ranks` ranks take
/// `gpus` GPUs in turn (local rank r on GPU r % gpus); 1 without GPUs.
int64_t ranks_on_device(int64_t local_rank, int64_t local_ranks, int gpus);

/// Peak resident memory of this process so far (bytes).
int64_t peak_host_memory_bytes();
/// Resident memory of this process now, split by who owns it, so hosts can be sized: the
/// private part is this process's alone; the shared part is file pages (the memory-mapped
/// token caches, which every rank of a host maps once between them, and the libraries) and
/// shared memory.
struct HostMemory {
  int64_t private_bytes = 0;  ///< RssAnon of /proc/self/status
  int64_t shared_bytes = 0;   ///< RssFile + RssShmem
};
/// Zeros where /proc/self/status has no such lines.
HostMemory host_memory_now();
/// host_memory_now from the text of a /proc/<pid>/status file.
HostMemory parse_host_memory(const std::string& proc_status);
/// Peak memory allocated by LibTorch on CUDA device `index` since start (bytes); 0 without CUDA.
int64_t peak_cuda_memory_bytes(int index);
/// Memory of a CUDA device as the driver and LibTorch's caching allocator see it (bytes).
struct CudaMemory {
  int64_t free = 0;       ///< free on the device, for every process (cudaMemGetInfo)
  int64_t total = 0;      ///< the device's memory
  int64_t allocated = 0;  ///< held by this process's tensors now
  int64_t reserved = 0;   ///< held by this process's caching allocator (allocated or cached)
};
/// Zeros without CUDA or for an index out of range.
CudaMemory cuda_memory(int index);
/// Restarts peak_cuda_memory_bytes from what is allocated now; no-op without CUDA.
void reset_peak_cuda_memory(int index);
/// Returns the caching allocator's unused blocks to the driver; no-op without CUDA.
void release_cached_cuda_memory();
/// Whether `error` says that device memory ran out: LibTorch's OutOfMemoryError, and also the
/// plain c10::Error in which cuBLAS, cuDNN, the CUDA runtime or NCCL report a failed
/// allocation (CUBLAS_STATUS_ALLOC_FAILED, cudaErrorMemoryAllocation, "out of memory", ...).
bool is_out_of_memory(const std::exception& error);
/// Device memory that NCCL allocates for itself (channels' buffers, proxy state) outside
/// LibTorch's allocator, so outside any measured peak: what the max_tokens auto fit leaves
/// free when gradients are summed with NCCL. NCCL's default buffers (NCCL_BUFFSIZE 4 MiB per
/// channel and peer, up to 32 channels, twice for send and receive) come to a few hundred MiB
/// on one node.
inline constexpr int64_t kNcclHeadroomBytes = int64_t{768} << 20;

/// Makes CUDA device `index` this thread's current device, so that work without an explicit
/// device (library scratch space, NCCL, new streams) lands on this rank's GPU rather than on
/// GPU 0; no-op without CUDA or for an index out of range.
void use_cuda_device(int index);
/// Waits until CUDA device `index` has finished its queued work (for timing); no-op without
/// CUDA.
void synchronize_cuda(int index);

/// LibTorch's own log lines (c10d retries, warnings with stack traces) go to stderr unless
/// hidden: show them only when debugging, since our errors carry what they say.
void show_libtorch_logs(bool show);

/// Probes devices. Never throws for a missing GPU or driver: that is reported in
/// no_cuda_reason and the run falls back to CPU workers.
DeviceInfo probe_devices();

}  // namespace nmt::dist
