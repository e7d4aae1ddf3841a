#pragma once
// What one nmt-train invocation does once its command line is parsed: read the config, then
// pick one of print the config, dry run, launch this node's workers (the built-in launcher),
// benchmark, or train this process's rank; every run ends by writing <run_dir>/summary.json.

#include "config/train_cli.h"

namespace nmt::job {

/// Runs the command; returns the exit code. `argc`/`argv` are relaunched as workers by the
/// built-in launcher. Errors are exceptions (main reports them).
int run_train_command(const config::TrainCommand& command, int argc, char** argv);

}  // namespace nmt::job
