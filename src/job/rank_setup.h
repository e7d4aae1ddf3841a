#pragma once
// One worker's setup, from the effective config and the environment: how many workers run on
// this node (the worker policy), the checkpoint it resumes from (whose config joins the
// sources), this rank's threads and device, its process group, the data (rank 0 prepares it
// first, the others then load it), data.max_tokens resolved, and the RunSetup that the
// training components take.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <utility>

#include "checkpoint/checkpoint_file.h"
#include "config/run_config.h"
#include "config/train_cli.h"
#include "data/prepare.h"
#include "dist/device.h"
#include "dist/worker_env.h"
#include "job/fine_tune.h"
#include "train/max_tokens_fit.h"
#include "train/run_setup.h"

namespace nmt::job {

/// Workers this node runs: under a launcher, its count; else dist.nproc_per_node; else one
/// per GPU (1 without GPU).
int64_t local_workers(const config::RunConfig& config, const dist::DeviceInfo& devices,
                      const dist::WorkerEnv& worker);

/// The checkpoint a run resumes from: none; the newest one under run_dir/checkpoints that
/// loads, verifies and is of this config's model (newer files that are not are skipped with a
/// warning naming them); or the given file, which must load.
std::optional<LoadedCheckpoint> find_resume_checkpoint(const config::RunConfig& config,
                                                       const config::ResumeFrom& from);

/// One rank, ready to train or benchmark.
struct Rank {
  config::RunConfig config;           ///< effective config: checkpoint layer, max_tokens resolved
  train::RunSetup setup;              ///< what the training components take
  data::PreparedData data;            ///< vocabulary and token caches
  std::optional<LoadedCheckpoint> resume;  ///< the checkpoint to restore, if any
  /// train.init_from's checkpoint when the run starts fresh from it (fine-tuning)
  std::optional<LoadedCheckpoint> init;
  std::optional<train::MaxTokensFit> max_tokens_fit;  ///< what data.max_tokens: auto measured
};

/// Sets up this process's rank; `resume` says where it starts (a benchmark passes kNone).
Rank set_up_rank(const config::TrainCommand& command, config::RunConfig config,
                 const config::ResumeFrom& resume, const dist::DeviceInfo& devices,
                 const dist::WorkerEnv& worker);

}  // namespace nmt::job
