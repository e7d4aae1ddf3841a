// dist/worker_process: the environment a launcher's worker gets, and how its exit is told.
#include <catch2/catch.hpp>

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dist/store_socket.h"
#include "dist/worker_process.h"

using nmt::dist::LaunchOptions;

namespace {

/// The value of name in env ("<unset>" when absent).
std::string value_of(const std::vector<std::string>& env, const std::string& name) {
  for (const std::string& entry : env)
    if (entry.rfind(name + "=", 0) == 0) return entry.substr(name.size() + 1);
  return "<unset>";
}

}  // namespace

TEST_CASE("a worker's environment holds torchrun's variables and drops an outer agent store",
          "[dist][launch]") {
  ::setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  ::setenv("RANK", "7", 1);
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.nnodes = 3;
  o.node_rank = 1;
  o.master_addr = "10.0.0.1";
  const auto env = nmt::dist::worker_environment(o, 29500, 1, 2, 5);
  ::unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  ::unsetenv("RANK");
  CHECK(value_of(env, "RANK") == "3");
  CHECK(value_of(env, "LOCAL_RANK") == "1");
  CHECK(value_of(env, "WORLD_SIZE") == "6");
  CHECK(value_of(env, "LOCAL_WORLD_SIZE") == "2");
  CHECK(value_of(env, "GROUP_RANK") == "1");
  CHECK(value_of(env, "MASTER_ADDR") == "10.0.0.1");
  CHECK(value_of(env, "MASTER_PORT") == "29500");
  CHECK(value_of(env, "TORCHELASTIC_RESTART_COUNT") == "2");
  CHECK(value_of(env, "NMT_LAUNCHER_WORKER") == "1");
  CHECK(value_of(env, "TORCHELASTIC_USE_AGENT_STORE") == "<unset>");
  // Only rank 0 of node 0 hosts the store: this worker gets the variable, empty.
  CHECK(value_of(env, nmt::dist::kStoreFdVariable) == "");
  CHECK(std::count_if(env.begin(), env.end(), [](const std::string& e) {
          return e.rfind("RANK=", 0) == 0;
        }) == 1);
  o.node_rank = 0;
  CHECK(value_of(nmt::dist::worker_environment(o, 29500, 0, 0, 5), nmt::dist::kStoreFdVariable) ==
        "5");
}

TEST_CASE("a worker's exit is told as its code or its signal", "[dist][launch]") {
  const int exited_3 = 3 << 8;  // the waitpid status of exit(3)
  REQUIRE(WIFEXITED(exited_3));
  CHECK(nmt::dist::describe_exit(exited_3) == "code 3");
  CHECK(nmt::dist::exit_code_of(exited_3) == 3);
  const int killed = SIGKILL;  // the waitpid status of a SIGKILL
  REQUIRE(WIFSIGNALED(killed));
  CHECK(nmt::dist::describe_exit(killed) == "signal SIGKILL");
  CHECK(nmt::dist::exit_code_of(killed) == 128 + SIGKILL);
}
