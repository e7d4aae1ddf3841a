#pragma once
// Processes, devices and gradient synchronization (YAML section `dist`).

#include <cstdint>
#include <string>

namespace nmt::dist {

/// Collective backend: auto picks NCCL on CUDA devices and Gloo on CPU.
enum class Backend { kAuto, kNccl, kGloo };

struct DistOptions {
  int64_t nproc_per_node = 0;           ///< workers on this node; 0: one per GPU, or 1 on CPU
  Backend backend = Backend::kAuto;     ///< collective backend
  std::string master_addr = "127.0.0.1";  ///< rendezvous host when no launcher sets one
  int64_t master_port = 0;              ///< rendezvous port; 0: a free port
  int64_t timeout_s = 600;              ///< a collective or rendezvous waiting longer fails (s)
  int64_t stop_grace_s = 300;           ///< the launcher's wait after forwarding SIGTERM before
                                        ///< SIGKILL: one update plus a checkpoint write (s)
  double bucket_mb = 25.0;              ///< gradient all-reduce bucket size (MB)
  bool overlap = true;                  ///< all-reduce buckets during backward
};

}  // namespace nmt::dist
