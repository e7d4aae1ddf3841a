#include "dist/launcher.h"

// Torch-free on purpose: the launcher runs before any LibTorch work (see launcher.h).
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <string_view>

#include "dist/store_socket.h"
#include "util/error.h"
#include "util/log.h"

extern char** environ;

namespace nmt::dist {
namespace {

using Clock = std::chrono::steady_clock;

/// A worker line longer than this is passed on in pieces, so one endless line cannot
/// exhaust the launcher's memory.
constexpr size_t kMaxLine = 64 * 1024;

/// Write end of the self-pipe through which signal handlers wake the poll loop.
volatile sig_atomic_t g_signal_fd = -1;

void on_signal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  if (g_signal_fd >= 0) (void)!::write(g_signal_fd, &byte, 1);
  errno = saved;
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGKILL: return "SIGKILL";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    default: return fmt::format("signal {}", sig);
  }
}

/// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

/// While alive: SIGINT/SIGTERM/SIGCHLD wake the poll loop through a self-pipe and SIGPIPE is
/// ignored (a closed stdout must not kill the launcher and orphan the workers). Restores the
/// previous dispositions on destruction.
class SignalScope {
 public:
  SignalScope() {
    int fds[2];
    NMT_CHECK(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0, DistError, "launch: pipe2 failed: {}",
              std::strerror(errno));
    read_ = Fd(fds[0]);
    write_ = Fd(fds[1]);
    g_signal_fd = write_.get();
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    ::sigaction(SIGINT, &action, &old_int_);
    ::sigaction(SIGTERM, &action, &old_term_);
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    ::sigaction(SIGCHLD, &action, &old_chld_);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    ::sigaction(SIGPIPE, &ignore, &old_pipe_);
  }
  ~SignalScope() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::sigaction(SIGCHLD, &old_chld_, nullptr);
    ::sigaction(SIGPIPE, &old_pipe_, nullptr);
    g_signal_fd = -1;
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

  int fd() const { return read_.get(); }
  /// The SIGINT/SIGTERM received since the last call, oldest first (SIGCHLD only wakes).
  std::vector<int> take() {
    std::vector<int> signals;
    unsigned char buffer[64];
    ssize_t n;
    while ((n = ::read(read_.get(), buffer, sizeof buffer)) > 0)
      for (ssize_t i = 0; i < n; ++i)
        if (buffer[i] != SIGCHLD) signals.push_back(buffer[i]);
    return signals;
  }

 private:
  Fd read_, write_;
  struct sigaction old_int_ {}, old_term_ {}, old_chld_ {}, old_pipe_ {};
};

/// Writes all of text to fd; output to a closed stdout is dropped.
void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<size_t>(n));
  }
}

/// One output stream of a worker: a pipe read line by line and copied to our fd `target`.
struct Stream {
  Fd pipe;          // read end, non-blocking; -1 after EOF
  int target = 1;   // our stdout or stderr
  std::string partial;
};

/// A worker process of the current attempt.
struct Worker {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;  // waitpid status once exited
  Stream out, err;
  std::string last_line;  // last non-empty line on either stream
};

/// The last non-empty line of a text file (read from its end), or "" when there is none.
std::string last_line_of(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - 8192);
  std::string tail(static_cast<size_t>(size - start), '\0');
  in.seekg(start);
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
  const size_t newline = tail.rfind('\n');
  return newline == std::string::npos ? tail : tail.substr(newline + 1);
}

void emit_line(Worker& w, Stream& s, std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (!line.empty()) w.last_line = std::string(line);
  // One write per line, so lines of different workers never interleave mid-line.
  write_all(s.target, fmt::format("[rank {}] {}\n", w.rank, line));
}

/// Reads what the pipe holds now and passes on the complete lines; at EOF also the rest.
void pump(Worker& w, Stream& s) {
  char buffer[16384];
  while (s.pipe.get() >= 0) {
    const ssize_t n = ::read(s.pipe.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // EAGAIN: nothing more for now
    if (n == 0) {
      if (!s.partial.empty()) emit_line(w, s, s.partial);
      s.partial.clear();
      s.pipe.reset();
      return;
    }
    s.partial.append(buffer, static_cast<size_t>(n));
    size_t start = 0, newline;
    while ((newline = s.partial.find('\n', start)) != std::string::npos) {
      emit_line(w, s, std::string_view(s.partial).substr(start, newline - start));
      start = newline + 1;
    }
    s.partial.erase(0, start);
    if (s.partial.size() >= kMaxLine) {
      emit_line(w, s, s.partial);
      s.partial.clear();
    }
  }
}

/// Passes on whatever is left and closes the pipe (a worker's children may still hold it).
void finish(Worker& w, Stream& s) {
  pump(w, s);
  if (!s.partial.empty()) emit_line(w, s, s.partial);
  s.partial.clear();
  s.pipe.reset();
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

/// The workers' environment: ours, minus what we set or what would mislead them, plus theirs.
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

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

/// Forks and execs one worker; its stdout/stderr go to new pipes in w.
void spawn(Worker& w, const LaunchOptions& o, int port, int restart_count, int dev_null,
           int store_fd) {
  std::vector<std::string> env = worker_environment(o, port, w.local_rank, restart_count, store_fd);
  const int inherited_fd = o.node_rank == 0 && w.local_rank == 0 ? store_fd : -1;
  std::vector<std::string> args = o.argv;
  std::vector<char*> envp = c_strings(env), argv = c_strings(args);
  int out[2], err[2];
  NMT_CHECK(::pipe2(out, O_CLOEXEC) == 0, DistError, "launch: pipe2 failed: {}",
            std::strerror(errno));
  w.out.pipe = Fd(out[0]);
  Fd out_write(out[1]);
  NMT_CHECK(::pipe2(err, O_CLOEXEC) == 0, DistError, "launch: pipe2 failed: {}",
            std::strerror(errno));
  w.err.pipe = Fd(err[0]);
  Fd err_write(err[1]);
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
    if (::getppid() != launcher) ::_exit(128 + SIGTERM);  // the launcher died before prctl
    if (inherited_fd >= 0) ::fcntl(inherited_fd, F_SETFD, 0);  // rank 0 keeps it across exec
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

/// How one attempt ended.
struct Attempt {
  int failed_rank = -1;   ///< the first worker that failed, or -1
  int exit_code = 0;      ///< our exit code for this attempt
  int interrupt = 0;      ///< SIGINT/SIGTERM received, or 0
};

/// Runs all workers once, until every one has exited.
Attempt run_attempt(const LaunchOptions& o, int port, int restart_count, SignalScope& signals,
                    int store_fd) {
  Fd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  NMT_CHECK(dev_null.get() >= 0, DistError, "launch: cannot open /dev/null: {}",
            std::strerror(errno));
  std::vector<Worker> workers(static_cast<size_t>(o.nproc_per_node));
  Attempt result;
  std::optional<Clock::time_point> kill_at;  // set once the workers are being stopped
  bool killed = false;
  auto signal_all = [&](int sig) {
    for (Worker& w : workers)
      if (w.running) ::kill(-w.pid, sig);
  };
  auto stop_all = [&](int sig) {
    signal_all(sig);
    // A stopped worker (SIGSTOP, a debugger) acts on the signal only once continued.
    signal_all(SIGCONT);
    if (!kill_at) kill_at = Clock::now() + o.stop_grace;
  };
  try {
    for (int i = 0; i < o.nproc_per_node; ++i) {
      Worker& w = workers[static_cast<size_t>(i)];
      w.local_rank = i;
      w.rank = o.node_rank * o.nproc_per_node + i;
      spawn(w, o, port, restart_count, dev_null.get(), store_fd);
    }
  } catch (...) {
    signal_all(SIGKILL);
    for (Worker& w : workers)
      if (w.running) ::waitpid(w.pid, nullptr, 0);
    throw;
  }

  auto any_running = [&] {
    return std::any_of(workers.begin(), workers.end(), [](const Worker& w) { return w.running; });
  };
  while (any_running()) {
    std::vector<pollfd> fds{{signals.fd(), POLLIN, 0}};
    std::vector<std::pair<Worker*, Stream*>> owners{{nullptr, nullptr}};
    for (Worker& w : workers)
      for (Stream* s : {&w.out, &w.err})
        if (s->pipe.get() >= 0) {
          fds.push_back({s->pipe.get(), POLLIN, 0});
          owners.emplace_back(&w, s);
        }
    // SIGCHLD wakes us; the timeout only bounds a missed wake-up and the SIGKILL deadline.
    auto timeout = std::chrono::milliseconds(200);
    if (kill_at && !killed)
      timeout = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(
                               *kill_at - Clock::now()) + std::chrono::milliseconds(1),
                           std::chrono::milliseconds(0), timeout);
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
    if (ready < 0 && errno != EINTR)
      NMT_THROW(DistError, "launch: poll failed: {}", std::strerror(errno));
    for (size_t i = 1; ready > 0 && i < fds.size(); ++i)
      if (fds[i].revents) pump(*owners[i].first, *owners[i].second);

    for (int sig : signals.take()) {
      log::info("launch", "received {}; passing it on to the workers", signal_name(sig));
      if (!result.interrupt) result.interrupt = sig;
      stop_all(sig);
    }
    for (Worker& w : workers) {
      if (!w.running || ::waitpid(w.pid, &w.status, WNOHANG) != w.pid) continue;
      w.running = false;
      pump(w, w.out);  // what it wrote just before exiting, for "its last line"
      pump(w, w.err);
      const bool ok = WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
      if (ok || kill_at) continue;  // once stopping, exits are expected, not failures
      result.failed_rank = w.rank;
      result.exit_code = exit_code_of(w.status);
      std::string log_end;
      if (!o.log_dir.empty()) {
        const auto file = o.log_dir / fmt::format("rank{}.log", w.rank);
        if (const std::string line = last_line_of(file); !line.empty())
          log_end = fmt::format("; its log {} ends: {}", file.string(), line);
      }
      log::error("launch", "worker rank {} exited with {}; its last line: {}{}", w.rank,
                 describe_exit(w.status), w.last_line.empty() ? "(none)" : w.last_line, log_end);
      log::info("launch", "stopping the other workers (SIGTERM, SIGKILL after {} s)",
                o.stop_grace.count());
      stop_all(SIGTERM);
    }
    if (kill_at && !killed && Clock::now() >= *kill_at && any_running()) {
      log::warn("launch", "workers still running {} s after the stop signal; sending SIGKILL",
                o.stop_grace.count());
      signal_all(SIGKILL);
      killed = true;
    }
  }
  for (Worker& w : workers) {
    finish(w, w.out);
    finish(w, w.err);
  }
  if (result.interrupt && result.failed_rank < 0) {
    const bool all_ok = std::all_of(workers.begin(), workers.end(), [](const Worker& w) {
      return WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
    });
    result.exit_code = all_ok ? 0 : 128 + result.interrupt;
  }
  return result;
}

}  // namespace

int launch_workers(const LaunchOptions& options) {
  validate(options);
  // On one node without a given port, the store's socket is bound here, on the loopback
  // address, and handed to rank 0 (and again to each restart's rank 0): no port race.
  Fd store_socket;
  int port = options.master_port;
  if (port == 0) {
    const StoreSocket bound = listen_for_store(options.master_addr, 0);
    store_socket = Fd(bound.fd);
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
    const Attempt attempt = run_attempt(options, port, restart, signals, store_socket.get());
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
  Fd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
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
