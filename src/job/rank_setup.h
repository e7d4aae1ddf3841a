#pragma once
// One worker's setup, in two stages: resolve, then build. It takes the run directory's lock,
// finds where the run resumes (job/resume_policy.h), places the rank (the rendezvous, this
// rank's threads and device, its process group: a train::RankContext made once), prepares the
// data (rank 0 first, the others then load it), and settles every `auto` on that context:
// amp.mode (rank 0's choice, timed when it must be: job/amp_agreement.h) and data.max_tokens
// (train/max_tokens_fit.h). Only then is the run built: the settled config, its YAML and hash
// once, and the RunSetup that the training components take.
//
//   Rank rank = set_up_rank(command, config, resume, devices, worker);
//   train::Trainer trainer(rank.setup, rank.data);   // rank.setup.max_tokens is a number

#include <cstdint>
#include <memory>
#include <optional>

#include "amp/amp_choice.h"
#include "config/run_config.h"
#include "config/train_cli.h"
#include "data/prepare.h"
#include "dist/device.h"
#include "dist/rendezvous.h"
#include "dist/worker_env.h"
#include "job/fine_tune.h"
#include "job/run_dir_owner.h"
#include "train/amp_timing.h"
#include "train/max_tokens_fit.h"
#include "train/run_setup.h"
#include "util/run_dir_lock.h"

namespace nmt::job {

/// `worker` with what the launcher left unsaid filled in from the rendezvous: the ranks on
/// this host (no LOCAL_WORLD_SIZE or local size) and this rank's place among them (no
/// LOCAL_RANK). Said in the log. A process that no launcher started is returned as it is.
dist::WorkerEnv with_host_ranks(dist::WorkerEnv worker, const dist::HostRanks& host);

/// Workers this node runs: under a launcher, its count; else dist.nproc_per_node; else one
/// per GPU (1 without GPU).
int64_t local_workers(const config::RunConfig& config, const dist::DeviceInfo& devices,
                      const dist::WorkerEnv& worker);

/// The run's config with its autos settled: amp.mode `precision`, data.max_tokens
/// `max_tokens`. Checkpoints store this one, so a resumed run keeps both.
config::RunConfig settled_config(config::RunConfig config, amp::AmpMode precision,
                                 int64_t max_tokens);

/// The settings the training components take, of a config whose autos are settled
/// (settled_config): plain values, the YAML text and its hash.
train::RunSettings run_settings(const config::RunConfig& settled);

/// One rank, ready to train or benchmark.
struct Rank {
  /// The run directory's lock, when this rank holds it (rank 0 without our launcher); first,
  /// so that it is released last.
  std::shared_ptr<RunDirLock> run_dir_lock;
  config::RunConfig config;  ///< the settled config: checkpoint layer, no auto left
  train::RunSetup setup;     ///< what the training components take, built from config
  data::PreparedData data;   ///< vocabulary and token caches
  std::optional<LoadedCheckpoint> resume;  ///< the checkpoint to restore, if any
  /// train.init_from's checkpoint when the run starts fresh from it (fine-tuning)
  std::optional<LoadedCheckpoint> init;
  std::optional<train::MaxTokensFit> max_tokens_fit;  ///< what data.max_tokens: auto measured
  amp::AmpChoice amp;  ///< the precision in effect and why (amp.mode settled)
  std::optional<train::AmpTiming> amp_timing;  ///< what amp.mode auto timed, if it did
};

/// Sets up this process's rank; `resume` says where it starts (a benchmark passes kNone).
/// `claim`: this process's attempt at the run directory's lock when it made one already
/// (claim_run_dir); without it, set_up_rank makes it. With several ranks every rank must call
/// it: the settling of amp.mode and data.max_tokens all-gathers.
Rank set_up_rank(const config::TrainCommand& command, config::RunConfig config,
                 const config::ResumeFrom& resume, const dist::DeviceInfo& devices,
                 const dist::WorkerEnv& worker, std::optional<RunDirClaim> claim = std::nullopt);

}  // namespace nmt::job
