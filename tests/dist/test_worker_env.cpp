
#include "catch_torch.h"  // first: see the header

#include <map>

#include "dist/worker_env.h"
#include "util/error.h"

using nmt::dist::detect_worker_env;
using nmt::dist::first_host_of_nodelist;
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
  CHECK(none.launcher == nmt::dist::Launcher::kNone);
  CHECK(none.rank == 0);
  CHECK(none.world_size == 1);

  WorkerEnv torchrun = detect({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
                               {"MASTER_ADDR", "n1"}});
  CHECK(torchrun.launcher == nmt::dist::Launcher::kTorchrun);
  CHECK(torchrun.rank == 3);
  CHECK(torchrun.world_size == 8);
  CHECK(torchrun.local_rank == 1);

  WorkerEnv mpi = detect({{"OMPI_COMM_WORLD_RANK", "1"},
                          {"OMPI_COMM_WORLD_SIZE", "2"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  CHECK(mpi.launcher == nmt::dist::Launcher::kMpirun);
  CHECK(mpi.rank == 1);

  WorkerEnv slurm = detect({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "1"},
                           {"SLURM_STEP_ID", "0"}, {"SLURM_JOB_NODELIST", "gpu[1-4]"}});
  CHECK(slurm.launcher == nmt::dist::Launcher::kSlurm);
  CHECK(slurm.world_size == 16);

  // torchrun's variables win when a torchrun job runs inside a Slurm allocation.
  CHECK(detect({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "n1"}, {"SLURM_PROCID", "1"},
                {"SLURM_NTASKS", "4"}})
            .launcher == nmt::dist::Launcher::kTorchrun);
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

TEST_CASE("torchrun's rendezvous, restart count and agent store are read", "[dist]") {
  WorkerEnv env = detect({{"RANK", "5"},
                          {"WORLD_SIZE", "8"},
                          {"LOCAL_RANK", "1"},
                          {"LOCAL_WORLD_SIZE", "4"},
                          {"MASTER_ADDR", "node3"},
                          {"MASTER_PORT", "29400"},
                          {"TORCHELASTIC_RESTART_COUNT", "2"},
                          {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  CHECK(env.launcher == nmt::dist::Launcher::kTorchrun);
  CHECK(env.local_world_size == 4);
  CHECK(env.master_addr == "node3");
  CHECK(env.master_port == 29400);
  CHECK(env.restart_count == 2);
  CHECK(env.agent_store);
  CHECK_FALSE(env.launched_by_us);

  WorkerEnv ours = detect({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"},
                           {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                           {"MASTER_PORT", "41234"}, {"TORCHELASTIC_RESTART_COUNT", "0"},
                           {"TORCHELASTIC_USE_AGENT_STORE", "False"},
                           {"NMT_LAUNCHER_WORKER", "1"}});
  CHECK(ours.launcher == nmt::dist::Launcher::kNmtTrain);
  CHECK(ours.launched_by_us);
  CHECK_FALSE(ours.agent_store);
  CHECK(ours.master_port == 41234);

  WorkerEnv none = detect({});
  CHECK(none.master_addr == "127.0.0.1");
  CHECK(none.master_port == 29500);
  CHECK(none.local_world_size == 1);
  CHECK(none.restart_count == 0);
  CHECK_FALSE(none.agent_store);
  CHECK_FALSE(none.launched_by_us);
}

TEST_CASE("OpenMPI and PMI ranks get a rendezvous host when they can", "[dist]") {
  // All ranks on this node: the store is local.
  WorkerEnv local = detect({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  CHECK(local.launcher == nmt::dist::Launcher::kMpirun);
  CHECK(local.local_world_size == 4);
  CHECK(local.master_addr == "127.0.0.1");
  CHECK(local.master_port == 29500);

  // Several nodes: only an exported MASTER_ADDR will do.
  const std::map<std::string, std::string> two_nodes = {
      {"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
  const std::string error = error_of(two_nodes);
  CHECK_THAT(error, Catch::Contains("MASTER_ADDR is not set"));
  CHECK_THAT(error, Catch::Contains("OMPI_COMM_WORLD_LOCAL_SIZE=2"));
  CHECK_THAT(error, Catch::Contains("mpirun -x MASTER_ADDR=host"));
  auto exported = two_nodes;
  exported["MASTER_ADDR"] = "head";
  exported["MASTER_PORT"] = "23456";
  WorkerEnv env = detect(exported);
  CHECK(env.master_addr == "head");
  CHECK(env.master_port == 23456);
  CHECK(env.local_world_size == 2);

  // MPICH's hydra: PMI_RANK/PMI_SIZE with MPI_LOCALNRANKS.
  WorkerEnv pmi = detect({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "1"},
                          {"MPI_LOCALNRANKS", "2"}});
  CHECK(pmi.launcher == nmt::dist::Launcher::kPmi);
  CHECK(pmi.master_addr == "127.0.0.1");
  // PMIx gives the rank only; the size comes from PMI_SIZE or Slurm.
  CHECK(detect({{"PMIX_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALNRANKS", "2"}}).rank == 1);
  WorkerEnv pmix_slurm = detect({{"PMIX_RANK", "3"}, {"SLURM_PROCID", "3"}, {"SLURM_STEP_ID", "0"},
                                 {"SLURM_NTASKS", "4"}, {"SLURM_NNODES", "1"}});
  CHECK(pmix_slurm.launcher == nmt::dist::Launcher::kSlurm);
  CHECK(pmix_slurm.local_world_size == 4);
  CHECK_THAT(error_of({{"PMIX_RANK", "0"}}), Catch::Contains("PMIX_RANK is set but"));
}

TEST_CASE("Slurm ranks find rank 0's host from the node list", "[dist]") {
  const std::map<std::string, std::string> job = {
      {"SLURM_PROCID", "5"},  {"SLURM_NTASKS", "8"},
      {"SLURM_LOCALID", "1"}, {"SLURM_NNODES", "2"},
      {"SLURM_NODEID", "1"},  {"SLURM_TASKS_PER_NODE", "4(x2)"},
      {"SLURM_STEP_ID", "3"}, {"SLURM_JOB_NODELIST", "node[01-03,07],gpu5"}};
  WorkerEnv env = detect(job);
  CHECK(env.launcher == nmt::dist::Launcher::kSlurm);
  CHECK(env.master_addr == "node01");
  CHECK(env.master_port == 29500);
  CHECK(env.local_world_size == 4);

  auto step = job;
  step["SLURM_STEP_NODELIST"] = "node[03,07]";  // the step runs on part of the job's nodes
  CHECK(detect(step).master_addr == "node03");

  auto one_node = job;
  one_node["SLURM_NNODES"] = "1";
  one_node.erase("SLURM_JOB_NODELIST");
  CHECK(detect(one_node).master_addr == "127.0.0.1");
  CHECK(detect(one_node).local_world_size == 8);

  auto uneven = job;
  uneven["SLURM_TASKS_PER_NODE"] = "5,3";
  CHECK(detect(uneven).local_world_size == 3);

  auto exported = job;
  exported["MASTER_ADDR"] = "login2";
  CHECK(detect(exported).master_addr == "login2");

  auto no_list = job;
  no_list.erase("SLURM_JOB_NODELIST");
  CHECK_THAT(error_of(no_list), Catch::Contains("MASTER_ADDR is not set"));
}

TEST_CASE("a Slurm batch script is not an srun task", "[dist]") {
  // What Slurm 22.05 sets in the batch script of `sbatch --ntasks=2` (the job's view, rank
  // variables included) and in a task of `srun` inside it (tests/e2e/test_slurm.sh runs both).
  const std::map<std::string, std::string> batch = {
      {"SLURM_JOB_ID", "7"},        {"SLURM_PROCID", "0"},     {"SLURM_NTASKS", "2"},
      {"SLURM_LOCALID", "0"},       {"SLURM_NNODES", "1"},     {"SLURM_NODEID", "0"},
      {"SLURM_TASKS_PER_NODE", "2"}, {"SLURM_JOB_NODELIST", "vm"}};
  WorkerEnv script = detect(batch);
  CHECK(script.launcher == nmt::dist::Launcher::kNone);
  CHECK(script.rank == 0);
  CHECK(script.world_size == 1);

  auto task = batch;
  task["SLURM_STEP_ID"] = "0";
  task["SLURM_STEPID"] = "0";
  task["SLURM_PROCID"] = "1";
  task["SLURM_LOCALID"] = "1";
  WorkerEnv rank = detect(task);
  CHECK(rank.launcher == nmt::dist::Launcher::kSlurm);
  CHECK(rank.rank == 1);
  CHECK(rank.world_size == 2);
  CHECK(rank.local_world_size == 2);
  // Older Slurm sets only SLURM_STEPID.
  task.erase("SLURM_STEP_ID");
  CHECK(detect(task).launcher == nmt::dist::Launcher::kSlurm);

  // Steps that run no srun tasks carry reserved ids above 0xfffffff0 (batch 0xfffffffb,
  // 0xfffffffe in older Slurm; extern 0xfffffffc or 0xffffffff; interactive 0xfffffffa).
  for (const char* special :
       {"4294967291", "4294967294", "4294967292", "4294967295", "4294967290"}) {
    auto step = batch;
    step["SLURM_STEP_ID"] = special;
    INFO(special);
    CHECK(detect(step).launcher == nmt::dist::Launcher::kNone);
  }
  auto bad = batch;
  bad["SLURM_STEP_ID"] = "batch";
  CHECK(error_of(bad) ==
        "environment variable SLURM_STEP_ID=batch: expected a Slurm step id (an integer >= 0)");
}

TEST_CASE("Slurm node lists: the first host of the compressed form", "[dist]") {
  CHECK(first_host_of_nodelist("node[01-03,07],gpu5") == "node01");
  CHECK(first_host_of_nodelist("gpu5") == "gpu5");
  CHECK(first_host_of_nodelist("gpu5,node[1-2]") == "gpu5");
  CHECK(first_host_of_nodelist("node[7,3-4]") == "node7");
  CHECK(first_host_of_nodelist("rack[2-3]-n[007-009]") == "rack2-n007");
  CHECK(first_host_of_nodelist("a-b.c[10]") == "a-b.c10");
  auto error = [](const std::string& list) {
    try {
      first_host_of_nodelist(list);
    } catch (const nmt::DistError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(error("node[01-03"), Catch::Contains("SLURM_JOB_NODELIST=node[01-03: '[' without ']'"));
  CHECK_THAT(error("node]"), Catch::Contains("']' without '['"));
  CHECK_THAT(error(""), Catch::Contains("empty"));
  CHECK_THAT(error(",node1"), Catch::Contains("no host"));
  CHECK_THAT(error("node[x-y]"), Catch::Contains("does not start with a number"));
}

TEST_CASE("bad rendezvous variables name the variable", "[dist]") {
  const std::map<std::string, std::string> base = {{"RANK", "0"}, {"WORLD_SIZE", "2"},
                                                   {"LOCAL_WORLD_SIZE", "2"}};
  auto with = [&](const char* name, const char* value) {
    auto vars = base;
    vars[name] = value;
    return error_of(vars);
  };
  CHECK(with("MASTER_PORT", "0") ==
        "environment variable MASTER_PORT=0: expected an integer in [1, 65535]");
  CHECK(with("MASTER_PORT", "70000") ==
        "environment variable MASTER_PORT=70000: expected an integer in [1, 65535]");
  CHECK(with("MASTER_PORT", "http") ==
        "environment variable MASTER_PORT=http: expected an integer in [1, 65535]");
  CHECK(with("TORCHELASTIC_RESTART_COUNT", "-1") ==
        "environment variable TORCHELASTIC_RESTART_COUNT=-1: expected an integer >= 0");
  CHECK_THAT(with("MASTER_ADDR", ""), Catch::Contains("MASTER_ADDR is empty"));
  CHECK(with("LOCAL_WORLD_SIZE", "3") == "environment: LOCAL_WORLD_SIZE=3 exceeds WORLD_SIZE=2");
  CHECK(with("LOCAL_RANK", "2") == "environment: LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2");
  CHECK(with("LOCAL_WORLD_SIZE", "none") ==
        "environment variable LOCAL_WORLD_SIZE=none: expected an integer >= 1");
}

TEST_CASE("the store port: MASTER_PORT or the launcher's, else dist.master_port", "[dist]") {
  using nmt::dist::store_port;
  // One process started by hand (a single-GPU NCCL run): dist.master_port, 0 a free port.
  CHECK(store_port(detect({}), 0) == 0);
  CHECK(store_port(detect({}), 1234) == 1234);
  CHECK(store_port(detect({{"MASTER_PORT", "4000"}}), 0) == 4000);
  // A launcher's rank: the launcher's port, torchrun's default when it sets none.
  CHECK(store_port(detect({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"},
                           {"MASTER_PORT", "4001"}}),
                   0) == 4001);
  CHECK(store_port(detect({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}}), 0) ==
        nmt::dist::kDefaultMasterPort);
}
