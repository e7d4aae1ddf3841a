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
