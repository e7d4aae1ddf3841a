#pragma once
// Who this process is in a multi-process job, read from the variables that launchers set:
// torchrun and our own launcher (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, ...), OpenMPI
// (OMPI_COMM_WORLD_*), PMI/PMIx/MPICH (PMI_RANK or PMIX_RANK, PMI_SIZE) and Slurm srun
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, in a task of an srun step only: a batch script
// also has SLURM_PROCID, but no SLURM_STEP_ID of a normal step, and is no rank).
//
// Only torchrun and our launcher set the rendezvous address. For the others, MASTER_ADDR
// defaults to 127.0.0.1 when every rank runs on this node, else (Slurm) to the first host of
// the step's node list, else it must be exported (mpirun -x MASTER_ADDR=host); MASTER_PORT
// defaults to 29500, as with torchrun.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace nmt::dist {

/// The rendezvous port used when MASTER_PORT is unset (torchrun's default).
constexpr int kDefaultMasterPort = 29500;

/// What started this process.
enum class Launcher {
  kNone,      ///< nothing: a process started by hand (nmt-train may launch workers itself)
  kNmtTrain,  ///< nmt-train's own launcher
  kTorchrun,  ///< torchrun (or anything that sets RANK and WORLD_SIZE)
  kMpirun,    ///< OpenMPI's mpirun
  kPmi,       ///< PMI/PMIx (MPICH, Intel MPI, srun --mpi=pmix)
  kSlurm,     ///< Slurm's srun
};

/// "none", "nmt-train", "torchrun", "mpirun", "pmi" or "slurm".
const char* launcher_name(Launcher launcher);

/// This process's place in the job.
struct WorkerEnv {
  Launcher launcher = Launcher::kNone;  ///< what started this process
  int rank = 0;                   ///< global rank in [0, world_size)
  int world_size = 1;             ///< processes in the job
  int local_rank = 0;             ///< rank among the processes of this node
  bool local_rank_set = true;     ///< false: the launcher does not say (local_rank 0 stands in)
  int local_world_size = 1;       ///< processes on this node; 0 when the launcher does not say
  std::string master_addr = "127.0.0.1";  ///< host of rank 0's store (MASTER_ADDR or derived)
  int master_port = kDefaultMasterPort;   ///< port of the store (MASTER_PORT, or 29500)
  bool master_port_set = false;           ///< MASTER_PORT was in the environment
  int restart_count = 0;  ///< TORCHELASTIC_RESTART_COUNT: times the launcher restarted the workers
  bool agent_store = false;  ///< TORCHELASTIC_USE_AGENT_STORE=True: the launcher hosts the store,
                             ///< so rank 0 connects to it as a client instead of creating it
  bool launched_by_us = false;  ///< NMT_LAUNCHER_WORKER=1: started by nmt-train's own launcher
  int store_fd = -1;  ///< rank 0 under nmt-train's launcher: the store's listening socket
                      ///< (NMT_STORE_FD, see store_socket.h); -1 otherwise
};

/// Reads an environment variable; returns nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const char*)>;

/// Detects the launcher from the environment (first match: torchrun, OpenMPI, PMI, Slurm).
/// Throws DistError naming the variable when a value is not a number or out of range, or when
/// ranks span several nodes and no rendezvous host is known.
WorkerEnv detect_worker_env(const EnvLookup& lookup);
/// detect_worker_env over the process environment.
WorkerEnv detect_worker_env();

/// The port of the job's store: MASTER_PORT or the launcher's, else, for a process that no
/// launcher started, `configured` (dist.master_port; 0: a free port, which one rank can take).
int store_port(const WorkerEnv& worker, int64_t configured);

/// The first host of a Slurm node list in its compressed form ("node[01-03,07],gpu5" ->
/// "node01"; "rack[2-3]-n[7,9]" -> "rack2-n7"). Throws DistError naming `variable` when
/// malformed.
std::string first_host_of_nodelist(const std::string& nodelist,
                                   const char* variable = "SLURM_JOB_NODELIST");

}  // namespace nmt::dist
