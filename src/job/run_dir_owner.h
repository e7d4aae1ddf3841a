#pragma once
// Which process of a job holds the run directory's lock (util/run_dir_lock.h), for the run's
// life: the built-in launcher of node 0 (its workers, started by it, take none), or else rank
// 0 (one process; or torchrun, mpirun or Slurm ranks). In a job of several ranks the others
// check it: rank 0 tries first, then every rank learns in the job's first gather whether it
// got the lock, and all of them stop with rank 0's reason when it did not (they would
// otherwise wait in their first collective until dist.timeout_s).
//
//   std::optional<RunDirLock> lock = try_run_dir_lock(run_dir, worker);   // before the rendezvous
//   agree_on_run_dir_lock(communicator, lock_refusal);                   // after it

#include <filesystem>
#include <memory>
#include <string>

#include "dist/worker_env.h"
#include "util/run_dir_lock.h"

namespace nmt::dist {
class Communicator;
}

namespace nmt::job {

/// The attempt of one process at its run directory's lock.
struct RunDirClaim {
  /// Held (or unlocked, on a file system without flock); shared, so that the claim stays
  /// copyable while the Rank keeps it.
  std::shared_ptr<RunDirLock> lock;
  std::string refusal;  ///< why another process holds it; empty when this one does
};

/// Whether this worker process is the one that locks run_dir: rank 0, unless nmt-train's own
/// launcher started it (the launcher holds the lock).
bool locks_run_dir(const dist::WorkerEnv& worker);

/// The lock when this worker is the one that takes it (locks_run_dir), else nothing. A lock
/// held elsewhere is not thrown here but returned as the refusal, for the other ranks to hear.
RunDirClaim claim_run_dir(const std::filesystem::path& run_dir, const dist::WorkerEnv& worker);

/// Every rank's word on the claim: rank 0's refusal, in one gather on `comm` (each rank must
/// call it); throws ConfigError with it on every rank when rank 0 was refused. Without a
/// communicator (one process), throws the claim's own refusal, if any.
void agree_on_run_dir_claim(dist::Communicator* comm, const RunDirClaim& claim);

}  // namespace nmt::job
