#include "dist/launcher.h"

// Torch-free on purpose: the launcher runs before any LibTorch work (see launcher.h). Its
// parts: launch_signals (the signal self-pipe), worker_process (spawning a worker),
// worker_output (pumping the workers' output); here the attempt and the restart loop.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "dist/launch_signals.h"
#include "dist/store_socket.h"
#include "dist/unique_fd.h"
#include "dist/worker_output.h"
#include "dist/worker_process.h"
#include "util/error.h"
#include "util/log.h"

namespace nmt::dist {
namespace {

using Clock = std::chrono::steady_clock;

void validate(const LaunchOptions& o) {
  NMT_CHECK(o.nproc_per_node >= 1, DistError, "launch: nproc_per_node: expected >= 1, found {}",
            o.nproc_per_node);
  NMT_CHECK(o.nnodes >= 1, DistError, "launch: nnodes: expected >= 1, found {}", o.nnodes);
  NMT_CHECK(o.node_rank >= 0 && o.node_rank < o.nnodes, DistError,
            "launch: node_rank: expected in [0, {}) (nnodes {}), found {}", o.nnodes, o.nnodes,
            o.node_rank);
  NMT_CHECK(o.master_port >= 0 && o.master_port <= 65535, DistError,
            "launch: master_port: expected in [0, 65535], found {}", o.master_port);
  NMT_CHECK(o.master_port != 0 || o.nnodes == 1, DistError,
            "launch: master_port 0 (a free port) works only on one node; with nnodes {} every "
            "node must be given the same port",
            o.nnodes);
  NMT_CHECK(!o.master_addr.empty(), DistError, "launch: master_addr is empty");
  NMT_CHECK(o.max_restarts >= 0, DistError, "launch: max_restarts: expected >= 0, found {}",
            o.max_restarts);
  NMT_CHECK(o.stop_grace.count() >= 0, DistError, "launch: stop_grace: expected >= 0 s, found {}",
            o.stop_grace.count());
  NMT_CHECK(!o.argv.empty() && !o.argv[0].empty(), DistError,
            "launch: no worker command given");
}

/// How one attempt ended.
struct Attempt {
  int failed_rank = -1;   ///< the first worker that failed, or -1
  int exit_code = 0;      ///< our exit code for this attempt
  int interrupt = 0;      ///< SIGINT/SIGTERM received, or 0
};

/// One attempt: starts every worker of this node, then until all have exited pumps their
/// output, passes on the signals we receive, and on the first failure (or a signal) stops the
/// others: SIGTERM, then SIGKILL after stop_grace.
class AttemptRun {
 public:
  AttemptRun(const LaunchOptions& o, SignalScope& signals)
      : o_(o), signals_(signals), workers_(static_cast<size_t>(o.nproc_per_node)) {}

  /// Runs all workers once, until every one has exited.
  Attempt run(int port, int restart_count, int store_fd) {
    UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    NMT_CHECK(dev_null.get() >= 0, DistError, "launch: cannot open /dev/null: {}",
              std::strerror(errno));
    start(port, restart_count, dev_null.get(), store_fd);
    while (any_running()) {
      wait_and_pump();
      pass_on_signals();
      reap_exited();
      kill_after_grace();
    }
    return finish();
  }

 private:
  /// Spawns every worker; when one cannot be started, kills those that were and rethrows.
  void start(int port, int restart_count, int dev_null, int store_fd) {
    try {
      for (int i = 0; i < o_.nproc_per_node; ++i) {
        Worker& w = workers_[static_cast<size_t>(i)];
        w.local_rank = i;
        w.rank = o_.node_rank * o_.nproc_per_node + i;
        spawn(w, o_, port, restart_count, dev_null, store_fd);
      }
    } catch (...) {
      signal_all(SIGKILL);
      for (Worker& w : workers_)
        if (w.running) ::waitpid(w.pid, nullptr, 0);
      throw;
    }
  }

  /// Waits for output, a signal or the SIGKILL deadline, and passes on the output there is.
  void wait_and_pump() {
    std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
    std::vector<std::pair<Worker*, Stream*>> owners{{nullptr, nullptr}};
    for (Worker& w : workers_)
      for (Stream* s : {&w.out, &w.err})
        if (s->pipe.get() >= 0) {
          fds.push_back({s->pipe.get(), POLLIN, 0});
          owners.emplace_back(&w, s);
        }
    // SIGCHLD wakes us; the timeout only bounds a missed wake-up and the SIGKILL deadline.
    auto timeout = std::chrono::milliseconds(200);
    if (kill_at_ && !killed_)
      timeout = std::clamp(
          std::chrono::duration_cast<std::chrono::milliseconds>(*kill_at_ - Clock::now()) +
              std::chrono::milliseconds(1),
          std::chrono::milliseconds(0), timeout);
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
    if (ready < 0 && errno != EINTR)
      NMT_THROW(DistError, "launch: poll failed: {}", std::strerror(errno));
    for (size_t i = 1; ready > 0 && i < fds.size(); ++i)
      if (fds[i].revents) pump(*owners[i].first, *owners[i].second);
  }

  /// Forwards the SIGINT/SIGTERM we received to every worker; the first one is the attempt's
  /// interrupt.
  void pass_on_signals() {
    for (int sig : signals_.take()) {
      log::info("launch", "received {}; passing it on to the workers", signal_name(sig));
      if (!result_.interrupt) result_.interrupt = sig;
      stop_all(sig);
    }
  }

  /// Collects the workers that exited; the first failure (before any stop) is reported with
  /// its last line and stops the others.
  void reap_exited() {
    for (Worker& w : workers_) {
      if (!w.running || ::waitpid(w.pid, &w.status, WNOHANG) != w.pid) continue;
      w.running = false;
      pump(w, w.out);  // what it wrote just before exiting, for "its last line"
      pump(w, w.err);
      const bool ok = WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
      if (ok || kill_at_) continue;  // once stopping, exits are expected, not failures
      result_.failed_rank = w.rank;
      result_.exit_code = exit_code_of(w.status);
      report_failure(w);
      log::info("launch", "stopping the other workers (SIGTERM, SIGKILL after {} s)",
                o_.stop_grace.count());
      stop_all(SIGTERM);
    }
  }

  /// "worker rank R exited with ...; its last line: ...", and the end of its log when known.
  void report_failure(const Worker& w) const {
    std::string log_end;
    if (!o_.log_dir.empty()) {
      const auto file = o_.log_dir / fmt::format("rank{}.log", w.rank);
      if (const std::string line = last_line_of(file); !line.empty())
        log_end = fmt::format("; its log {} ends: {}", file.string(), line);
    }
    log::error("launch", "worker rank {} exited with {}; its last line: {}{}", w.rank,
               describe_exit(w.status), w.last_line.empty() ? "(none)" : w.last_line, log_end);
  }

  /// SIGKILL for the workers still running stop_grace after the stop signal.
  void kill_after_grace() {
    if (kill_at_ && !killed_ && Clock::now() >= *kill_at_ && any_running()) {
      log::warn("launch", "workers still running {} s after the stop signal; sending SIGKILL",
                o_.stop_grace.count());
      signal_all(SIGKILL);
      killed_ = true;
    }
  }

  /// Passes on the last output; after an interrupt without a failure, the exit code is 0 when
  /// every worker exited 0 (a graceful stop), else 128 + the signal.
  Attempt finish() {
    for (Worker& w : workers_) {
      dist::finish(w, w.out);
      dist::finish(w, w.err);
    }
    if (result_.interrupt && result_.failed_rank < 0) {
      const bool all_ok = std::all_of(workers_.begin(), workers_.end(), [](const Worker& w) {
        return WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
      });
      result_.exit_code = all_ok ? 0 : 128 + result_.interrupt;
    }
    return result_;
  }

  bool any_running() const {
    return std::any_of(workers_.begin(), workers_.end(), [](const Worker& w) { return w.running; });
  }

  void signal_all(int sig) {
    for (Worker& w : workers_)
      if (w.running) ::kill(-w.pid, sig);
  }

  /// Sends sig to every running worker and sets the SIGKILL deadline (once).
  void stop_all(int sig) {
    signal_all(sig);
    // A stopped worker (SIGSTOP, a debugger) acts on the signal only once continued.
    signal_all(SIGCONT);
    if (!kill_at_) kill_at_ = Clock::now() + o_.stop_grace;
  }

  const LaunchOptions& o_;
  SignalScope& signals_;
  std::vector<Worker> workers_;
  Attempt result_;
  std::optional<Clock::time_point> kill_at_;  // set once the workers are being stopped
  bool killed_ = false;
};

}  // namespace

int launch_workers(const LaunchOptions& options) {
  validate(options);
  // On one node without a given port, the store's socket is bound here, on the loopback
  // address, and handed to rank 0 (and again to each restart's rank 0): no port race.
  UniqueFd store_socket;
  int port = options.master_port;
  if (port == 0) {
    const StoreSocket bound = listen_for_store(options.master_addr, 0);
    store_socket = UniqueFd(bound.fd);
    port = bound.port;
  }
  const int world = options.nnodes * options.nproc_per_node;
  SignalScope signals;
  for (int restart = 0;; ++restart) {
    log::info("launch", "starting {} worker(s) (ranks {}-{} of {}, node {} of {}), rendezvous "
              "{}:{}{}",
              options.nproc_per_node, options.node_rank * options.nproc_per_node,
              (options.node_rank + 1) * options.nproc_per_node - 1, world,
              options.node_rank, options.nnodes, options.master_addr, port,
              restart > 0 ? fmt::format(", restart {} of {}", restart, options.max_restarts)
                          : std::string());
    const Attempt attempt = AttemptRun(options, signals).run(port, restart, store_socket.get());
    if (attempt.interrupt) return attempt.exit_code;
    if (attempt.failed_rank < 0) {
      log::info("launch", "all {} worker(s) exited with code 0", options.nproc_per_node);
      return 0;
    }
    if (restart >= options.max_restarts) {
      if (options.max_restarts > 0)
        log::error("launch", "giving up after {} restart(s)", options.max_restarts);
      return attempt.exit_code;
    }
    // A signal that arrived while the workers were being stopped ends the job here.
    for (int sig : signals.take()) {
      log::info("launch", "received {} before the restart; not restarting", signal_name(sig));
      return 128 + sig;
    }
    log::warn("launch", "restarting all {} worker(s) after the failure of rank {} (restart {} "
              "of {}); they resume from their last checkpoint",
              options.nproc_per_node, attempt.failed_rank, restart + 1, options.max_restarts);
  }
}

int find_free_port() {
  UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  NMT_CHECK(sock.get() >= 0, DistError, "find_free_port: socket failed: {}",
            std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  NMT_CHECK(::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0, DistError,
            "find_free_port: bind to port 0 failed: {}", std::strerror(errno));
  socklen_t length = sizeof addr;
  NMT_CHECK(::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&addr), &length) == 0,
            DistError, "find_free_port: getsockname failed: {}", std::strerror(errno));
  return ntohs(addr.sin_port);
}

}  // namespace nmt::dist
