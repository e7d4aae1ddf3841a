#pragma once
// The command line of nmt-train (CLI11). Flags that set config keys (--log-level,
// --nproc-per-node) become --set overrides, so the one precedence rule applies to them too.

#include <optional>
#include <string>
#include <vector>

#include "config/run_config.h"

namespace nmt::config {

/// Where a training run starts (--resume).
struct ResumeFrom {
  enum class Mode {
    kAuto,  ///< the newest valid checkpoint of the run, else fresh
    kNone,  ///< fresh, whatever the run directory holds
    kPath,  ///< the given checkpoint file, which must load
  };
  Mode mode = Mode::kAuto;
  std::string path;  ///< for kPath
};

/// What nmt-train was asked to do.
struct TrainCommand {
  std::optional<int> exit_code;  ///< set when parsing already answered (--help, --version, usage)
  ConfigSources sources;         ///< config file and overrides
  bool print_config = false;     ///< print the effective config as YAML and exit
  bool dry_run = false;          ///< prepare data and plan batches for every rank, no training
  ResumeFrom resume;             ///< --resume auto|none|PATH
  int nnodes = 1;                ///< nodes of the job, one launcher each (torchrun's --nnodes)
  int node_rank = 0;             ///< this node's index (torchrun's --node-rank)
  int max_restarts = 0;          ///< relaunch all workers after a failure, up to this many times
  int64_t benchmark_steps = 0;   ///< > 0: benchmark mode, that many timed updates
  int64_t benchmark_warmup = 5;  ///< untimed updates before them
  int64_t benchmark_phase_steps = -1;  ///< updates of the synced phase pass; -1: auto
  bool synthetic = false;        ///< benchmark on fixed-shape random batches
  int64_t synthetic_length = 0;  ///< tokens per synthetic sentence; 0: data.max_len / 2
  std::string dump_batches;      ///< benchmark: write rank 0's batches and initial parameters here
};

/// Parses argv. Prints help, version or a usage error itself and sets exit_code then.
TrainCommand parse_train_command(int argc, const char* const* argv);

}  // namespace nmt::config
