#include "dist/worker_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "dist/launch_signals.h"
#include "dist/store_socket.h"
#include "util/error.h"

extern char** environ;

namespace nmt::dist {
namespace {

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

std::vector<std::string> worker_environment(const LaunchOptions& o, int port, int local_rank,
                                            int restart_count, int store_fd) {
  std::vector<std::pair<std::string, std::string>> ours = {
      {"RANK", std::to_string(o.node_rank * o.nproc_per_node + local_rank)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"WORLD_SIZE", std::to_string(o.nnodes * o.nproc_per_node)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(port)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(restart_count)},
      {"NMT_LAUNCHER_WORKER", "1"},
  };
  // Rank 0 hosts the store on the socket bound here (store_socket.h); the variable is never
  // passed on from our own environment.
  const bool store_host = o.node_rank == 0 && local_rank == 0 && store_fd >= 0;
  ours.emplace_back(kStoreFdVariable, store_host ? std::to_string(store_fd) : "");
  auto is_replaced = [&](std::string_view entry) {
    const std::string_view name = entry.substr(0, entry.find('='));
    // An agent store of an outer torchrun is not ours: rank 0 hosts the store here.
    if (name == "TORCHELASTIC_USE_AGENT_STORE") return true;
    return std::any_of(ours.begin(), ours.end(), [&](const auto& kv) { return kv.first == name; });
  };
  std::vector<std::string> env;
  for (char** entry = environ; entry && *entry; ++entry)
    if (!is_replaced(*entry)) env.emplace_back(*entry);
  for (const auto& [name, value] : ours) env.push_back(name + "=" + value);
  return env;
}

void spawn(Worker& w, const LaunchOptions& o, int port, int restart_count, int dev_null,
           int store_fd) {
  std::vector<std::string> env = worker_environment(o, port, w.local_rank, restart_count, store_fd);
  const int inherited_fd = o.node_rank == 0 && w.local_rank == 0 ? store_fd : -1;
  std::vector<std::string> args = o.argv;
  std::vector<char*> envp = c_strings(env), argv = c_strings(args);
  int out[2], err[2];
  NMT_CHECK(::pipe2(out, O_CLOEXEC) == 0, DistError, "launch: pipe2 failed: {}",
            std::strerror(errno));
  w.out.pipe = UniqueFd(out[0]);
  UniqueFd out_write(out[1]);
  NMT_CHECK(::pipe2(err, O_CLOEXEC) == 0, DistError, "launch: pipe2 failed: {}",
            std::strerror(errno));
  w.err.pipe = UniqueFd(err[0]);
  UniqueFd err_write(err[1]);
  w.out.target = STDOUT_FILENO;
  w.err.target = STDERR_FILENO;
  const std::string exec_failed = fmt::format("cannot start {}: ", o.argv[0]);
  const pid_t launcher = ::getpid();
  // Log lines written through stdio before the fork must not be written twice.
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  NMT_CHECK(pid >= 0, DistError, "launch: fork failed for rank {}: {}", w.rank,
            std::strerror(errno));
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE}) ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // Own process group: a terminal's Ctrl-C reaches only the launcher, which forwards it
    // once, and stop signals reach a worker's children too.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != launcher) ::_exit(128 + SIGTERM);           // the launcher died before prctl
    if (inherited_fd >= 0) ::fcntl(inherited_fd, F_SETFD, 0);      // rank 0 keeps it across exec
    for (const int fd : o.inherited_fds) ::fcntl(fd, F_SETFD, 0);  // async-signal-safe
    ::dup2(dev_null, STDIN_FILENO);
    ::dup2(out_write.get(), STDOUT_FILENO);
    ::dup2(err_write.get(), STDERR_FILENO);
    ::execvpe(argv[0], argv.data(), envp.data());
    const int error = errno;
    (void)!::write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
    const char* reason = std::strerror(error);
    (void)!::write(STDERR_FILENO, reason, std::strlen(reason));
    (void)!::write(STDERR_FILENO, "\n", 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so the group exists before we might signal it
  w.pid = pid;
  w.running = true;
  for (Stream* s : {&w.out, &w.err})
    ::fcntl(s->pipe.get(), F_SETFL, ::fcntl(s->pipe.get(), F_GETFL) | O_NONBLOCK);
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return fmt::format("code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("signal {}", signal_name(WTERMSIG(status)));
  return fmt::format("status {}", status);
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace nmt::dist
