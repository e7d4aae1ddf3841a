#include "dist/worker_env.h"

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "dist/store_socket.h"
#include "util/error.h"

namespace nmt::dist {
namespace {

/// Names of the rank, size, local-rank and local-size variables of one launcher.
struct LauncherVars {
  Launcher launcher;
  const char* rank;
  const char* size;
  const char* local_rank;  // may be absent from the environment
  const char* local_size;  // may be absent; nullptr: this launcher has none
};

constexpr LauncherVars kLaunchers[] = {
    {Launcher::kTorchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {Launcher::kMpirun, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {Launcher::kPmi, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    // PMIx (OpenMPI 5's prterun, srun --mpi=pmix) gives the rank only; the size must come
    // from PMI_SIZE, else the entry is skipped and Slurm's variables are tried.
    {Launcher::kPmi, "PMIX_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {Launcher::kSlurm, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
};

int parse_int(const char* name, const std::string& text, int min, int max = 1 << 24) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  const bool ok = !text.empty() && end && *end == '\0' && errno == 0 && value >= min &&
                  value <= max;
  if (max == 1 << 24) {
    NMT_CHECK(ok, DistError, "environment variable {}={}: expected an integer >= {}", name,
              text, min);
  } else {
    NMT_CHECK(ok, DistError, "environment variable {}={}: expected an integer in [{}, {}]",
              name, text, min, max);
  }
  return static_cast<int>(value);
}

/// The value of the first of `names` that is set, with its name.
std::optional<std::pair<const char*, std::string>> first_set(
    const EnvLookup& lookup, std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (auto value = lookup(name)) return std::make_pair(name, *value);
  return std::nullopt;
}

/// Tasks on node `node` from Slurm's compressed per-node task counts ("2(x3),1"); 0 when the
/// list does not say.
int slurm_tasks_on_node(const std::string& list, int node) {
  size_t pos = 0;
  while (pos < list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(pos, comma - pos);
    pos = comma + 1;
    char* end = nullptr;
    const long tasks = std::strtol(item.c_str(), &end, 10);
    if (end == item.c_str() || tasks < 1) return 0;
    long repeat = 1;
    if (*end == '(') {
      if (end[1] != 'x') return 0;
      char* close = nullptr;
      repeat = std::strtol(end + 2, &close, 10);
      if (*close != ')' || close[1] != '\0' || repeat < 1) return 0;
    } else if (*end != '\0') {
      return 0;
    }
    if (node < repeat) return static_cast<int>(tasks);
    node -= static_cast<int>(repeat);
  }
  return 0;
}

/// Whether this process is a task of an srun step. Slurm sets the rank variables
/// (SLURM_PROCID, SLURM_NTASKS, ...) in a batch script too, as rank 0 of the job, but there
/// the step id is unset (Slurm 22.05) or one of the reserved ids above 0xfffffff0 (batch,
/// extern, interactive): such a process is no rank, and may start the built-in launcher.
bool is_srun_task(const EnvLookup& lookup) {
  const auto step = first_set(lookup, {"SLURM_STEP_ID", "SLURM_STEPID"});
  if (!step) return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long id = std::strtoull(step->second.c_str(), &end, 10);
  NMT_CHECK(!step->second.empty() && step->second[0] != '-' && *end == '\0' && errno == 0,
            DistError, "environment variable {}={}: expected a Slurm step id (an integer >= 0)",
            step->first, step->second);
  constexpr unsigned long long kMaxNormalStepId = 0xfffffff0;  // slurm.h
  return id <= kMaxNormalStepId;
}

/// Processes on this node under Slurm, or 0 when unknown.
int slurm_local_world_size(const EnvLookup& lookup, int world_size) {
  if (auto nodes = first_set(lookup, {"SLURM_STEP_NUM_NODES", "SLURM_NNODES",
                                      "SLURM_JOB_NUM_NODES"})) {
    if (parse_int(nodes->first, nodes->second, 1) == 1) return world_size;
  }
  if (auto per_node = lookup("SLURM_NTASKS_PER_NODE"))
    return parse_int("SLURM_NTASKS_PER_NODE", *per_node, 1);
  auto list = first_set(lookup, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"});
  if (!list) return 0;
  const auto node_id = lookup("SLURM_NODEID");
  return slurm_tasks_on_node(list->second, node_id ? parse_int("SLURM_NODEID", *node_id, 0) : 0);
}

/// Fills master_addr/master_port: MASTER_ADDR/MASTER_PORT, else derived (see the header).
void resolve_master(const EnvLookup& lookup, const LauncherVars* vars, WorkerEnv& env) {
  if (auto port = lookup("MASTER_PORT")) {
    env.master_port = parse_int("MASTER_PORT", *port, 1, 65535);
    env.master_port_set = true;
  }
  if (auto addr = lookup("MASTER_ADDR")) {
    NMT_CHECK(!addr->empty(), DistError,
              "environment variable MASTER_ADDR is empty; expected the host of rank 0");
    env.master_addr = *addr;
    return;
  }
  env.master_addr = "127.0.0.1";
  if (env.world_size == 1 || env.local_world_size == env.world_size) return;
  if (env.launcher == Launcher::kSlurm) {
    if (auto list = first_set(lookup, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
                                       "SLURM_NODELIST"})) {
      env.master_addr = first_host_of_nodelist(list->second, list->first);
      return;
    }
  }
  const std::string local_size =
      vars && vars->local_size
          ? fmt::format("{}={}", vars->local_size,
                        lookup(vars->local_size).value_or("(unset)"))
          : std::string("the local size is unknown");
  NMT_THROW(DistError,
            "environment: {} ranks span more than this node ({}={}, {}) but MASTER_ADDR is not "
            "set; export the host of rank 0 and a free port to every rank, e.g. mpirun -x "
            "MASTER_ADDR=host -x MASTER_PORT={}",
            env.world_size, vars ? vars->size : "WORLD_SIZE", env.world_size, local_size,
            kDefaultMasterPort);
}

}  // namespace

const char* launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::kNmtTrain: return "nmt-train";
    case Launcher::kTorchrun: return "torchrun";
    case Launcher::kMpirun: return "mpirun";
    case Launcher::kPmi: return "pmi";
    case Launcher::kSlurm: return "slurm";
    case Launcher::kNone: break;
  }
  return "none";
}

int store_port(const WorkerEnv& worker, int64_t configured) {
  if (worker.master_port_set || worker.launcher != Launcher::kNone) return worker.master_port;
  return static_cast<int>(configured);
}

std::string first_host_of_nodelist(const std::string& nodelist, const char* variable) {
  auto bad = [&](const char* why) {
    NMT_THROW(DistError, "environment variable {}={}: {}; expected a Slurm node list such as "
              "node[01-03,07],gpu5", variable, nodelist, why);
  };
  if (nodelist.empty()) bad("empty");
  std::string host;
  size_t i = 0;
  while (i < nodelist.size() && nodelist[i] != ',') {
    const char c = nodelist[i];
    if (c == ']') bad("']' without '['");
    if (c != '[') {
      host += c;
      ++i;
      continue;
    }
    const size_t close = nodelist.find(']', i);
    if (close == std::string::npos) bad("'[' without ']'");
    const std::string range = nodelist.substr(i + 1, close - i - 1);
    // The first element of "01-03,07" is the start of its first range: "01".
    const size_t stop = range.find_first_of(",-");
    const std::string first = range.substr(0, stop);
    if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos)
      bad("a bracket does not start with a number");
    host += first;
    i = close + 1;
  }
  if (host.empty()) bad("no host before the first ','");
  return host;
}

WorkerEnv detect_worker_env(const EnvLookup& lookup) {
  WorkerEnv env;
  const LauncherVars* found = nullptr;
  for (const LauncherVars& vars : kLaunchers) {
    const auto rank = lookup(vars.rank);
    if (!rank) continue;
    if (vars.launcher == Launcher::kSlurm && !is_srun_task(lookup)) continue;
    const auto size = lookup(vars.size);
    if (!size && std::string(vars.rank) == "PMIX_RANK") continue;
    NMT_CHECK(size.has_value(), DistError, "environment variable {} is set but {} is not",
              vars.rank, vars.size);
    found = &vars;
    env.launcher = vars.launcher;
    env.rank = parse_int(vars.rank, *rank, 0);
    env.world_size = parse_int(vars.size, *size, 1);
    NMT_CHECK(env.rank < env.world_size, DistError,
              "environment: {}={} is not below {}={}", vars.rank, env.rank, vars.size,
              env.world_size);
    const auto local = lookup(vars.local_rank);
    env.local_rank = local ? parse_int(vars.local_rank, *local, 0) : 0;
    env.local_rank_set = local.has_value() || env.world_size == 1;
    env.local_world_size = 0;
    if (vars.local_size) {
      if (auto local_size = lookup(vars.local_size))
        env.local_world_size = parse_int(vars.local_size, *local_size, 1);
    } else if (env.launcher == Launcher::kSlurm) {
      env.local_world_size = slurm_local_world_size(lookup, env.world_size);
    }
    if (env.world_size == 1) env.local_world_size = 1;
    if (env.local_world_size > 0) {
      NMT_CHECK(env.local_world_size <= env.world_size, DistError,
                "environment: {}={} exceeds {}={}", vars.local_size ? vars.local_size
                                                                    : "tasks on this node",
                env.local_world_size, vars.size, env.world_size);
      NMT_CHECK(!local || env.local_rank < env.local_world_size, DistError,
                "environment: {}={} is not below {}={}", vars.local_rank, env.local_rank,
                vars.local_size ? vars.local_size : "tasks on this node",
                env.local_world_size);
    }
    break;
  }
  if (!found) {
    NMT_CHECK(!lookup("PMIX_RANK"), DistError,
              "environment variable PMIX_RANK is set but no variable gives the world size "
              "(PMI_SIZE, SLURM_NTASKS)");
  }
  resolve_master(lookup, found, env);
  if (auto count = lookup("TORCHELASTIC_RESTART_COUNT"))
    env.restart_count = parse_int("TORCHELASTIC_RESTART_COUNT", *count, 0);
  if (auto store = lookup("TORCHELASTIC_USE_AGENT_STORE"))
    env.agent_store = *store == "True" || *store == "true" || *store == "1";
  env.launched_by_us = lookup("NMT_LAUNCHER_WORKER").value_or("") == "1";
  if (env.launched_by_us && env.launcher == Launcher::kTorchrun) env.launcher = Launcher::kNmtTrain;
  if (env.launched_by_us) {
    if (auto fd = lookup(kStoreFdVariable); fd && !fd->empty())
      env.store_fd = parse_int(kStoreFdVariable, *fd, 0);
  }
  return env;
}

WorkerEnv detect_worker_env() {
  return detect_worker_env([](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (!value) return std::nullopt;
    return std::string(value);
  });
}

}  // namespace nmt::dist
