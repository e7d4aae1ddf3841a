#pragma once
// What this machine offers for training: LibTorch build, CUDA devices, NCCL. No torch types
// in this header, so callers need not compile against LibTorch.

#include <cstdint>
#include <string>
#include <vector>

namespace nmt::dist {

/// Result of probing LibTorch and the CUDA devices visible to this process.
struct DeviceInfo {
  std::string torch_version;                ///< LibTorch version, e.g. "2.11.0"
  bool cuda_compiled = false;               ///< CUDA/NCCL code paths are compiled in
  std::string cuda_version;                 ///< CUDA version LibTorch was built with, or ""
  std::string nccl_version;                 ///< NCCL version LibTorch links, or ""
  int cuda_devices = 0;                     ///< visible CUDA devices
  std::vector<std::string> device_names;    ///< "NVIDIA H200, 139.8 GiB, sm_90" per device
  std::string no_cuda_reason;               ///< why cuda_devices is 0, for the user
  int cpu_cores = 0;                        ///< hardware threads of this machine
};

/// Peak resident memory of this process so far (bytes).
int64_t peak_host_memory_bytes();
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
