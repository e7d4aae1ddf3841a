// The launcher against fake workers: /bin/sh scripts written into a TempDir. Each launch runs
// in a forked child of the test, with its stdout/stderr in files, so that the prefixed worker
// output and the launcher's log can be checked and signals can be sent to the launcher.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "dist/launcher.h"
#include "test_support.h"
#include "util/error.h"

using nmt::dist::launch_workers;
using nmt::dist::LaunchOptions;
using nmt::test::lines_of;
using nmt::test::TempDir;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

struct LaunchResult {
  int exit_code = -1;    ///< launch_workers' return value (99: it threw)
  std::string out, err;  ///< the launcher's stdout and stderr
  double seconds = 0;    ///< wall time of the launch
};

/// Runs launch_workers(options) in a forked child; `while_running` gets the child's pid.
LaunchResult run_launcher(const LaunchOptions& options, const TempDir& dir,
                          const std::function<void(pid_t)>& while_running = {}) {
  const auto out_file = dir.path() / "launcher.out";
  const auto err_file = dir.path() / "launcher.err";
  std::fflush(nullptr);
  const auto start = Clock::now();
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::freopen(out_file.c_str(), "w", stdout);
    std::freopen(err_file.c_str(), "w", stderr);
    int code = 99;
    try {
      code = launch_workers(options);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "launch_workers threw: %s\n", e.what());
    }
    std::fflush(nullptr);
    _exit(code);
  }
  if (while_running) while_running(pid);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  LaunchResult result;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = nmt::test::read_file(out_file);
  result.err = nmt::test::read_file(err_file);
  return result;
}

/// Options that run `script` (given the temp dir as $1) under /bin/sh.
LaunchOptions sh_workers(const TempDir& dir, const std::string& script, int nproc) {
  LaunchOptions options;
  options.nproc_per_node = nproc;
  options.stop_grace = 5s;
  options.argv = {"/bin/sh", dir.write("worker.sh", script).string(), dir.path().string()};
  return options;
}

bool wait_for_file(const std::filesystem::path& file, std::chrono::seconds limit = 10s) {
  const auto deadline = Clock::now() + limit;
  while (!std::filesystem::exists(file)) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

/// Waits up to 2 s for a process (not our child) to be gone or a zombie.
bool wait_until_dead(pid_t pid) {
  const auto deadline = Clock::now() + 2s;
  while (Clock::now() < deadline) {
    const std::string stat = nmt::test::read_file("/proc/" + std::to_string(pid) + "/stat");
    const size_t paren = stat.rfind(')');
    if (stat.empty() || (paren != std::string::npos && stat.compare(paren, 3, ") Z") == 0))
      return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

}  // namespace

TEST_CASE("launcher gives each worker its rank and prefixes whole lines", "[dist][launch]") {
  TempDir dir;
  const std::string script = R"(
echo "env rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE lws=$LOCAL_WORLD_SIZE group=$GROUP_RANK addr=$MASTER_ADDR port=$MASTER_PORT restart=$TORCHELASTIC_RESTART_COUNT ours=$NMT_LAUNCHER_WORKER"
printf 'written in '; sleep 0.2; echo 'two pieces'
i=0
while [ $i -lt 300 ]; do echo "line $i of rank $RANK, padded to be long enough to be split by pipes"; i=$((i+1)); done
echo "to stderr from $RANK" >&2
if read x; then echo "stdin gave [$x]"; else echo "stdin at EOF"; fi
printf 'no newline at the end'
)";
  const LaunchResult r = run_launcher(sh_workers(dir, script, 3), dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);

  const std::regex prefixed(R"(\[rank (\d+)\] (.*))");
  const std::regex env_line(
      R"(env rank=(\d) local=(\d) world=3 lws=3 group=0 addr=127\.0\.0\.1 port=(\d+) restart=0 ours=1)");
  const std::regex long_line(R"(line \d+ of rank (\d), padded to be long enough to be split by pipes)");
  std::set<std::string> ranks, ports;
  int long_lines = 0, pieces = 0, eof = 0, tails = 0;
  for (const std::string& line : lines_of(r.out)) {
    std::smatch m;
    REQUIRE(std::regex_match(line, m, prefixed));
    const std::string rank = m[1], text = m[2];
    std::smatch e;
    if (std::regex_match(text, e, env_line)) {
      CHECK(e[1] == rank);
      CHECK(e[2] == rank);  // one node: local rank = rank
      ranks.insert(rank);
      ports.insert(e[3]);
    } else if (std::regex_match(text, e, long_line)) {
      CHECK(e[1] == rank);
      ++long_lines;
    } else if (text == "written in two pieces") {
      ++pieces;
    } else if (text == "stdin at EOF") {
      ++eof;
    } else if (text == "no newline at the end") {
      ++tails;
    } else {
      FAIL("unexpected line: " << line);
    }
  }
  CHECK(ranks == std::set<std::string>{"0", "1", "2"});
  REQUIRE(ports.size() == 1);
  CHECK(std::stoi(*ports.begin()) > 0);
  CHECK(long_lines == 900);
  CHECK(pieces == 3);
  CHECK(eof == 3);
  CHECK(tails == 3);
  for (int rank = 0; rank < 3; ++rank)
    CHECK(r.err.find(fmt::format("[rank {}] to stderr from {}\n", rank, rank)) !=
          std::string::npos);
  CHECK(r.err.find("[launch]") != std::string::npos);
}

TEST_CASE("launcher numbers the ranks of a later node", "[dist][launch]") {
  TempDir dir;
  LaunchOptions options = sh_workers(
      dir, "echo \"rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE group=$GROUP_RANK "
           "addr=$MASTER_ADDR port=$MASTER_PORT\"\n", 2);
  options.nnodes = 3;
  options.node_rank = 2;
  options.master_addr = "node7";
  options.master_port = 29555;
  const LaunchResult r = run_launcher(options, dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("[rank 4] rank=4 local=0 world=6 group=2 addr=node7 port=29555\n") !=
        std::string::npos);
  CHECK(r.out.find("[rank 5] rank=5 local=1 world=6 group=2 addr=node7 port=29555\n") !=
        std::string::npos);
}

TEST_CASE("a failing worker stops the others and is named with its last line",
          "[dist][launch]") {
  TempDir dir;
  const std::string script = R"(
if [ "$RANK" = 1 ]; then
  echo "about to fail"
  echo "fatal: disk full" >&2
  exit 3
fi
echo "rank $RANK sleeping"
sleep 60 &
echo $! > "$1/sleep.$RANK.tmp"; mv "$1/sleep.$RANK.tmp" "$1/sleep.$RANK"
wait $!
echo "rank $RANK was not stopped"
)";
  const LaunchResult r = run_launcher(sh_workers(dir, script, 3), dir);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 3);
  CHECK(r.seconds < 10);
  CHECK(r.err.find("worker rank 1 exited with code 3; its last line: fatal: disk full") !=
        std::string::npos);
  CHECK(r.out.find("was not stopped") == std::string::npos);
  // The stop signal reaches a worker's children too (its process group).
  for (const char* rank : {"0", "2"}) {
    const auto file = dir.path() / (std::string("sleep.") + rank);
    if (!std::filesystem::exists(file)) continue;  // stopped before it started its child
    const pid_t child = std::stoi(nmt::test::read_file(file));
    CHECK(wait_until_dead(child));
  }
}

TEST_CASE("a worker killed by a signal is reported with the signal", "[dist][launch]") {
  TempDir dir;
  const LaunchResult r =
      run_launcher(sh_workers(dir, "echo crashing; kill -SEGV $$\n", 1), dir);
  INFO(r.err);
  CHECK(r.exit_code == 128 + SIGSEGV);
  CHECK(r.err.find("worker rank 0 exited with signal SIGSEGV; its last line: crashing") !=
        std::string::npos);
}

TEST_CASE("a worker that dies silently is reported with the end of its own log file",
          "[dist][launch]") {
  // Ranks other than 0 print only warnings to the console, so a rank killed outright has no
  // last console line; its log file in the run directory says where it was.
  TempDir dir;
  LaunchOptions options = sh_workers(dir, R"(
mkdir -p "$1/logs"
printf 'step 99\nstep 100: backward done\n\n' > "$1/logs/rank$RANK.log"
if [ "$RANK" = 1 ]; then kill -KILL $$; fi
sleep 60
)", 2);
  options.log_dir = dir.path() / "logs";
  const LaunchResult r = run_launcher(options, dir);
  INFO(r.err);
  CHECK(r.exit_code == 128 + SIGKILL);
  CHECK(r.err.find("worker rank 1 exited with signal SIGKILL; its last line: (none); its log " +
                   (dir.path() / "logs" / "rank1.log").string() +
                   " ends: step 100: backward done") != std::string::npos);
}

TEST_CASE("a worker that ignores SIGTERM is killed after stop_grace", "[dist][launch]") {
  TempDir dir;
  const std::string script = R"(
if [ "$RANK" = 0 ]; then
  while [ ! -f "$1/ready" ]; do sleep 0.05; done
  exit 5
fi
trap '' TERM
touch "$1/ready"
sleep 60
)";
  LaunchOptions options = sh_workers(dir, script, 2);
  options.stop_grace = 1s;
  const LaunchResult r = run_launcher(options, dir);
  INFO(r.err);
  CHECK(r.exit_code == 5);
  CHECK(r.seconds >= 1.0);
  CHECK(r.seconds < 8);
  CHECK(r.err.find("SIGKILL") != std::string::npos);
}

TEST_CASE("max_restarts relaunches every worker with the restart count", "[dist][launch]") {
  TempDir dir;
  const std::string script = R"(
echo "attempt $TORCHELASTIC_RESTART_COUNT"
if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
  if [ "$RANK" = 1 ]; then
    while [ ! -f "$1/rank0-started" ]; do sleep 0.02; done
    exit 7
  fi
  touch "$1/rank0-started"
  sleep 60
fi
)";
  SECTION("one restart and the second attempt succeeds") {
    LaunchOptions options = sh_workers(dir, script, 2);
    options.max_restarts = 1;
    const LaunchResult r = run_launcher(options, dir);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.seconds < 10);
    for (const char* line : {"[rank 0] attempt 0", "[rank 1] attempt 0", "[rank 0] attempt 1",
                             "[rank 1] attempt 1"})
      CHECK(r.out.find(line) != std::string::npos);
    CHECK(r.err.find("restarting all 2 worker(s) after the failure of rank 1 (restart 1 of 1)") !=
          std::string::npos);
  }
  SECTION("without restarts the failure is final") {
    const LaunchResult r = run_launcher(sh_workers(dir, script, 2), dir);
    CHECK(r.exit_code == 7);
    CHECK(r.out.find("attempt 1") == std::string::npos);
  }
  SECTION("restarts run out") {
    LaunchOptions options = sh_workers(dir, "echo \"attempt $TORCHELASTIC_RESTART_COUNT\"; exit 4\n", 1);
    options.max_restarts = 2;
    const LaunchResult r = run_launcher(options, dir);
    INFO(r.err);
    CHECK(r.exit_code == 4);
    CHECK(r.out == "[rank 0] attempt 0\n[rank 0] attempt 1\n[rank 0] attempt 2\n");
    CHECK(r.err.find("giving up after 2 restart(s)") != std::string::npos);
  }
}

TEST_CASE("SIGTERM and SIGINT sent to the launcher reach the workers", "[dist][launch]") {
  TempDir dir;
  auto signal_when_started = [&](int sig) {
    return [&dir, sig](pid_t launcher) {
      for (const char* rank : {"0", "1"})
        CHECK(wait_for_file(dir.path() / (std::string("started.") + rank)));
      kill(launcher, sig);
    };
  };
  SECTION("workers that stop gracefully: exit code 0") {
    const std::string script = R"(
trap 'echo "got TERM"; exit 0' TERM
sleep 60 &
touch "$1/started.$RANK"
wait $!
echo "not interrupted"
)";
    const LaunchResult r =
        run_launcher(sh_workers(dir, script, 2), dir, signal_when_started(SIGTERM));
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.seconds < 10);
    CHECK(r.out.find("[rank 0] got TERM\n") != std::string::npos);
    CHECK(r.out.find("[rank 1] got TERM\n") != std::string::npos);
    CHECK(r.out.find("not interrupted") == std::string::npos);
    CHECK(r.err.find("received SIGTERM") != std::string::npos);
  }
  SECTION("workers that die of SIGINT: 128 + SIGINT") {
    const std::string script = "touch \"$1/started.$RANK\"; exec sleep 60\n";
    const LaunchResult r =
        run_launcher(sh_workers(dir, script, 2), dir, signal_when_started(SIGINT));
    INFO(r.err);
    CHECK(r.exit_code == 128 + SIGINT);
    CHECK(r.seconds < 10);
    CHECK(r.err.find("exited with") == std::string::npos);  // an interrupt, not a failure
  }
}

TEST_CASE("workers of a killed launcher get SIGTERM", "[dist][launch]") {
  TempDir dir;
  // Orphaned workers are re-parented to this test, which can then see how they ended.
  REQUIRE(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  const std::string script = "echo $$ > \"$1/pid.$RANK.tmp\"; mv \"$1/pid.$RANK.tmp\" \"$1/pid.$RANK\"; exec sleep 60\n";
  std::vector<pid_t> workers;
  const LaunchResult r = run_launcher(sh_workers(dir, script, 2), dir, [&](pid_t launcher) {
    for (const char* rank : {"0", "1"}) {
      const auto file = dir.path() / (std::string("pid.") + rank);
      REQUIRE(wait_for_file(file));
      workers.push_back(std::stoi(nmt::test::read_file(file)));
    }
    kill(launcher, SIGKILL);
  });
  CHECK(r.exit_code == 128 + SIGKILL);
  for (pid_t worker : workers) {
    int status = 0;
    pid_t done = 0;
    const auto deadline = Clock::now() + 5s;
    while ((done = waitpid(worker, &status, WNOHANG)) == 0 && Clock::now() < deadline)
      std::this_thread::sleep_for(20ms);
    if (done == 0) kill(worker, SIGKILL), waitpid(worker, &status, 0);
    CHECK(done == worker);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGTERM);
  }
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

TEST_CASE("launcher rejects bad options and reports a missing executable", "[dist][launch]") {
  LaunchOptions options;
  CHECK_THROWS_AS(launch_workers(options), nmt::DistError);  // no command
  options.argv = {"/bin/true"};
  options.nnodes = 2;
  CHECK_THROWS_WITH(launch_workers(options),
                    Catch::Contains("master_port 0 (a free port) works only on one node"));
  options.master_port = 29500;
  options.node_rank = 2;
  CHECK_THROWS_WITH(launch_workers(options), Catch::Contains("node_rank: expected in [0, 2)"));

  TempDir dir;
  LaunchOptions missing;
  missing.argv = {(dir.path() / "no-such-program").string()};
  const LaunchResult r = run_launcher(missing, dir);
  CHECK(r.exit_code == 127);
  CHECK(r.err.find("[rank 0] cannot start") != std::string::npos);
  CHECK(r.err.find("worker rank 0 exited with code 127") != std::string::npos);
}

TEST_CASE("find_free_port returns a port that can be bound", "[dist][launch]") {
  const int port = nmt::dist::find_free_port();
  REQUIRE(port > 0);
  REQUIRE(port < 65536);
  const int sock = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(sock >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  CHECK(bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  close(sock);
}
