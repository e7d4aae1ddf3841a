#pragma once
// The launcher: one process per node that starts this node's workers (one per GPU) with
// torchrun's environment, streams their output, forwards signals, stops them all when one
// fails and optionally restarts them. It runs before any LibTorch work, so neither this header
// nor its sources (launcher.cpp, launch_signals, worker_process, worker_output, unique_fd.h)
// include LibTorch. POSIX only (fork/exec, pipes, poll, signals).
//
//   LaunchOptions options;
//   options.nproc_per_node = 4;
//   options.argv = {"/path/to/nmt-train", "--config", "run.yaml"};
//   return launch_workers(options);  // 0 when every worker exited 0

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace nmt::dist {

/// How launch_workers starts and supervises the workers of this node.
struct LaunchOptions {
  int nproc_per_node = 1;                ///< workers on this node
  int nnodes = 1;                        ///< nodes in the job (one launcher per node)
  int node_rank = 0;                     ///< this node's index in [0, nnodes)
  std::string master_addr = "127.0.0.1"; ///< host of rank 0 (the rendezvous store)
  int master_port = 0;                   ///< rendezvous port; 0: pick a free one (nnodes 1 only)
  int max_restarts = 0;                  ///< on a worker failure: stop all, relaunch all, up to N times
  std::chrono::seconds stop_grace{30};   ///< after SIGTERM, wait this long before SIGKILL
  std::vector<std::string> argv;         ///< the worker command (argv[0]: executable, PATH searched)
  /// Where workers write rank<R>.log; when set, a failed worker's report ends with its log's
  /// last line (a rank killed outright has often printed nothing to the console).
  std::filesystem::path log_dir;
  /// Open file descriptors every worker keeps across exec (their close-on-exec flag cleared in
  /// the child), e.g. the run directory's lock: a flock lasts while any process holds its open
  /// file, so the run stays locked until the last worker has exited, also when the launcher
  /// dies first.
  std::vector<int> inherited_fds;
};

/// Starts nproc_per_node workers with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
/// GROUP_RANK, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT and NMT_LAUNCHER_WORKER=1
/// set and stdin on /dev/null; streams each worker's stdout/stderr to ours line by line,
/// prefixed "[rank R] " (whole lines, never interleaved mid-line); forwards SIGINT/SIGTERM to
/// all workers. Returns 0 when all exit 0. When one exits non-zero or by a signal, logs
/// "worker rank R exited with code C (or signal S); its last line: ..." (and, with log_dir,
/// "; its log <dir>/rank<R>.log ends: ..."), stops the others
/// (SIGTERM, then SIGKILL after stop_grace) and, while max_restarts allows, relaunches all
/// with TORCHELASTIC_RESTART_COUNT increased (a worker resumes from its checkpoint); otherwise
/// returns its exit code (128 + signal for a signal). After a forwarded SIGINT/SIGTERM it
/// returns 0 if every worker exited 0 (a graceful stop), else 128 + that signal.
/// Each worker runs in its own process group, which signals reach as a whole, and gets SIGTERM
/// should the launcher die (PR_SET_PDEATHSIG: call this from the thread that lives longest).
/// Throws DistError for invalid options or when a worker cannot be started.
int launch_workers(const LaunchOptions& options);

/// A TCP port that is free on this host now (bound to port 0 on INADDR_ANY and read back).
/// Throws DistError naming the failed call.
int find_free_port();

}  // namespace nmt::dist
