#pragma once
// Who this process is in a multi-process job, read from the variables that launchers set:
// torchrun (RANK, WORLD_SIZE, LOCAL_RANK), OpenMPI (OMPI_COMM_WORLD_*), PMI/MPICH
// (PMI_RANK, PMI_SIZE) and Slurm srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID).

#include <functional>
#include <optional>
#include <string>

namespace nmt::dist {

/// This process's place in the job.
struct WorkerEnv {
  std::string launcher = "none";  ///< "torchrun", "mpirun", "pmi", "slurm" or "none"
  int rank = 0;                   ///< global rank in [0, world_size)
  int world_size = 1;             ///< processes in the job
  int local_rank = 0;             ///< rank among the processes of this node
};

/// Reads an environment variable; returns nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const char*)>;

/// Detects the launcher from the environment (first match: torchrun, OpenMPI, PMI, Slurm).
/// Throws DistError naming the variable when a value is not a number or out of range.
WorkerEnv detect_worker_env(const EnvLookup& lookup);
/// detect_worker_env over the process environment.
WorkerEnv detect_worker_env();

}  // namespace nmt::dist
