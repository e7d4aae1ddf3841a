#include "dist/worker_env.h"

#include <cerrno>
#include <cstdlib>

#include "util/error.h"

namespace nmt::dist {
namespace {

/// Names of the rank, size and local-rank variables of one launcher.
struct LauncherVars {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local_rank;  // may be absent from the environment
};

constexpr LauncherVars kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

int parse_int(const char* name, const std::string& text, int min) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  const bool ok = !text.empty() && end && *end == '\0' && errno == 0 && value >= min &&
                  value <= 1 << 24;
  NMT_CHECK(ok, DistError, "environment variable {}={}: expected an integer >= {}", name, text,
            min);
  return static_cast<int>(value);
}

}  // namespace

WorkerEnv detect_worker_env(const EnvLookup& lookup) {
  WorkerEnv env;
  for (const LauncherVars& vars : kLaunchers) {
    const auto rank = lookup(vars.rank);
    if (!rank) continue;
    const auto size = lookup(vars.size);
    NMT_CHECK(size.has_value(), DistError, "environment variable {} is set but {} is not",
              vars.rank, vars.size);
    env.launcher = vars.launcher;
    env.rank = parse_int(vars.rank, *rank, 0);
    env.world_size = parse_int(vars.size, *size, 1);
    NMT_CHECK(env.rank < env.world_size, DistError,
              "environment: {}={} is not below {}={}", vars.rank, env.rank, vars.size,
              env.world_size);
    const auto local = lookup(vars.local_rank);
    env.local_rank = local ? parse_int(vars.local_rank, *local, 0) : 0;
    return env;
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
