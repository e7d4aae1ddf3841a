#include "job/run_dir_owner.h"

#include <vector>

#include "dist/process_group.h"
#include "util/error.h"

namespace nmt::job {

bool locks_run_dir(const dist::WorkerEnv& worker) {
  return worker.rank == 0 && !worker.launched_by_us;
}

RunDirClaim claim_run_dir(const std::filesystem::path& run_dir, const dist::WorkerEnv& worker) {
  RunDirClaim claim;
  if (!locks_run_dir(worker)) return claim;
  try {
    claim.lock = std::make_shared<RunDirLock>(RunDirLock::acquire(run_dir));
  } catch (const ConfigError& e) {
    claim.refusal = e.what();
  }
  return claim;
}

void agree_on_run_dir_claim(dist::Communicator* comm, const RunDirClaim& claim) {
  std::string refusal = claim.refusal;
  if (comm) refusal = comm->all_gather_strings(claim.refusal).at(0);
  if (refusal.empty()) return;
  if (comm && comm->rank() != 0)
    NMT_THROW(ConfigError, "rank 0 could not take the run directory: {}", refusal);
  throw ConfigError(refusal, {__FILE__, __LINE__});
}

}  // namespace nmt::job
