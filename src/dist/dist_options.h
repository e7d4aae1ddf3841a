#pragma once
// Processes, devices and gradient synchronization (YAML section `dist`).

#include <cstdint>
#include <string>

namespace nmt::dist {

/// Collective backend: auto picks NCCL on CUDA devices and Gloo on CPU.
enum class Backend { kAuto, kNccl, kGloo };

/// What each rank keeps of the training state (ZeRO's stages, Rajbhandari et al. 2020).
enum class Sharding {
  kNone,       ///< every rank keeps everything: weights, gradients, optimizer state
  kOptimizer,  ///< each rank keeps the optimizer state (Adam's moments) of its share of the
               ///< parameters, steps them and sends them to the others (ZeRO stage 1)
};

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
  Sharding sharding = Sharding::kNone;  ///< optimizer state on every rank, or split over them
};

}  // namespace nmt::dist
