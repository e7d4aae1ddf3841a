#pragma once
// Starting one worker process of the launcher (fork/exec with torchrun's environment, its
// output on pipes) and describing how it ended. Torch-free, like the rest of the launcher
// (launcher.h).

#include <string>
#include <vector>

#include "dist/launcher.h"
#include "dist/worker_output.h"

namespace nmt::dist {

/// The environment of the worker of local_rank: ours, minus what we set or what would mislead
/// it, plus RANK, LOCAL_RANK, WORLD_SIZE, ... (launch_workers lists them) and, for rank 0 of
/// node 0, the store socket store_fd (store_socket.h; -1: none).
std::vector<std::string> worker_environment(const LaunchOptions& o, int port, int local_rank,
                                            int restart_count, int store_fd);

/// Forks and execs worker w (its local_rank and rank set) with stdin on dev_null, in its own
/// process group, with SIGTERM should the launcher die; its stdout/stderr go to new
/// non-blocking pipes in w. Throws DistError when a pipe or the fork fails.
void spawn(Worker& w, const LaunchOptions& o, int port, int restart_count, int dev_null,
           int store_fd);

/// "code C", "signal SIGSEGV": how a waitpid status ended, for people.
std::string describe_exit(int status);

/// Our exit code for a worker's waitpid status: its code, or 128 + its signal.
int exit_code_of(int status);

}  // namespace nmt::dist
