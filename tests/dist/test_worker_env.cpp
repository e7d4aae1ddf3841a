
#include "catch_torch.h"  // first: see the header

#include <map>

#include "dist/worker_env.h"
#include "util/error.h"

using nmt::dist::detect_worker_env;
using nmt::dist::WorkerEnv;

namespace {

WorkerEnv detect(const std::map<std::string, std::string>& vars) {
  return detect_worker_env([&](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    detect(vars);
  } catch (const nmt::DistError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("worker environment is read from each launcher's variables", "[dist]") {
  WorkerEnv none = detect({});
  CHECK(none.launcher == "none");
  CHECK(none.rank == 0);
  CHECK(none.world_size == 1);

  WorkerEnv torchrun = detect({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}});
  CHECK(torchrun.launcher == "torchrun");
  CHECK(torchrun.rank == 3);
  CHECK(torchrun.world_size == 8);
  CHECK(torchrun.local_rank == 1);

  WorkerEnv mpi = detect({{"OMPI_COMM_WORLD_RANK", "1"},
                          {"OMPI_COMM_WORLD_SIZE", "2"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  CHECK(mpi.launcher == "mpirun");
  CHECK(mpi.rank == 1);

  WorkerEnv slurm = detect({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "1"}});
  CHECK(slurm.launcher == "slurm");
  CHECK(slurm.world_size == 16);

  // torchrun's variables win when a torchrun job runs inside a Slurm allocation.
  CHECK(detect({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}})
            .launcher == "torchrun");
}

TEST_CASE("bad worker environment names the variable", "[dist]") {
  CHECK(error_of({{"RANK", "two"}, {"WORLD_SIZE", "4"}}) ==
        "environment variable RANK=two: expected an integer >= 0");
  CHECK(error_of({{"RANK", "1"}, {"WORLD_SIZE", "0"}}) ==
        "environment variable WORLD_SIZE=0: expected an integer >= 1");
  CHECK(error_of({{"RANK", "4"}, {"WORLD_SIZE", "4"}}) ==
        "environment: RANK=4 is not below WORLD_SIZE=4");
  CHECK(error_of({{"RANK", "0"}}) == "environment variable RANK is set but WORLD_SIZE is not");
}
