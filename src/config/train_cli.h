#pragma once
// The command line of nmt-train (CLI11). Flags that set config keys (--log-level,
// --nproc-per-node) become --set overrides, so the one precedence rule applies to them too.

#include <optional>
#include <string>
#include <vector>

#include "config/run_config.h"

namespace nmt::config {

/// What nmt-train was asked to do.
struct TrainCommand {
  std::optional<int> exit_code;  ///< set when parsing already answered (--help, --version, usage)
  ConfigSources sources;         ///< config file and overrides
  bool print_config = false;     ///< print the effective config as YAML and exit
  bool dry_run = false;          ///< prepare data and plan batches for every rank, no training
  std::string resume = "auto";   ///< "auto" (newest valid checkpoint), "none", or a file path
  int nnodes = 1;                ///< nodes of the job, one launcher each (torchrun's --nnodes)
  int node_rank = 0;             ///< this node's index (torchrun's --node-rank)
  int max_restarts = 0;          ///< relaunch all workers after a failure, up to this many times
};

/// Parses argv. Prints help, version or a usage error itself and sets exit_code then.
TrainCommand parse_train_command(int argc, const char* const* argv);

}  // namespace nmt::config
