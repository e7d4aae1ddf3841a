#pragma once
// One worker's setup, from the effective config and the environment: how many workers run on
// this node (the worker policy), the checkpoint it resumes from (whose config joins the
// sources), this rank's threads and device, its process group, the data (rank 0 prepares it
// first, the others then load it), data.max_tokens resolved to a number, and the RunSetup
// that the training components take.
//
//   Rank rank = set_up_rank(command, config, resume, devices, worker);
//   train::Trainer trainer(rank.setup, rank.data);   // rank.setup.max_tokens is a number

#include <cstdint>
#include <filesystem>
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

/// The checkpoint a run resumes from: none; the newest one under run_dir/checkpoints that
/// loads, verifies and is of this config's model (newer files that are not are skipped with a
/// warning naming them); or the given file, which must load.
std::optional<LoadedCheckpoint> find_resume_checkpoint(const config::RunConfig& config,
                                                       const config::ResumeFrom& from);

/// What a worker restarted after a failure (TORCHELASTIC_RESTART_COUNT > 0, from our launcher's
/// --max-restarts or torchrun's) resumes from: the newest checkpoint file in run_dir whose
/// metadata reads and whose step is after where the job started (the step of --resume PATH,
/// from its metadata or, when retention has deleted it since, its name; 0 for --resume none),
/// named as a file; else what it was given. Later checkpoints of the run it replaced were set
/// aside before it started (set_aside_replaced_checkpoints, Trainer), so these are the job's.
config::ResumeFrom resume_after_restart(const config::RunConfig& config,
                                        const config::ResumeFrom& given);

/// The config a resuming run's workers will have (resumed_config), read from the checkpoint's
/// metadata alone, before any worker starts: of the given file (--resume PATH) or of the
/// newest file in run_dir whose metadata reads (auto). `config` itself for a fresh start, or
/// when no metadata reads (the workers then say why). The launcher takes the number of
/// workers from it, so a run started with --nproc-per-node 2 resumes with 2 without the flag.
config::RunConfig config_to_resume(const config::ConfigSources& sources,
                                   const config::RunConfig& config, const config::ResumeFrom& from);

/// A resume that ranks checkpoints otherwise than the run it continues (another
/// train.best_metric or best_set, given with --set) starts the best-so-far and the patience
/// count over, with a warning: kept, minus BLEU as the best of a loss would never be beaten
/// and patience would stop the run. Retention's keep_best and best_or_last still rank files by
/// the selection each stored, so the old run's files may still be kept or chosen (the warning
/// says so). Drops the two from the checkpoint's metadata; returns true when it did.
bool restart_best_record_if_ranked_otherwise(LoadedCheckpoint& resume,
                                             const config::RunConfig& config);

/// Moves the checkpoints of later steps than where `from` starts (--resume PATH's step, 0 for
/// none; nothing for auto) into checkpoints/superseded-<time>/ with a warning, their records
/// of metrics.jsonl and tensorboard/ with them (train::set_aside_records_after), and returns
/// that folder. The built-in launcher calls it before its workers start, so that a restart after a
/// failure early in the first attempt does not take the replaced run's; the trainer's rank 0
/// does the same at its start for runs without our launcher.
std::optional<std::filesystem::path> set_aside_replaced_checkpoints(const config::RunConfig& config,
                                                                    const config::ResumeFrom& from);

/// The effective config of a run: `config` itself when it starts fresh; when it resumes, the
/// sources read again with the checkpoint's config between the file and --set.
config::RunConfig resumed_config(const config::ConfigSources& sources, config::RunConfig config,
                                 const std::optional<LoadedCheckpoint>& resume);

/// What amp.mode auto decides from on this machine: its GPUs' compute capabilities, else the
/// CPU's features (devices.cpu, as probe_devices read them).
amp::AmpHardware amp_hardware(const dist::DeviceInfo& devices);

/// Resolves amp.mode of `config` (auto: amp/amp_choice.h's rule for this machine) and writes
/// the mode into it, so that checkpoints store the mode and a resumed run keeps it. A choice
/// that needs timing (a CPU with bf16 instructions) leaves amp.mode auto: set_up_rank times
/// the model (time_amp) and writes the mode then.
amp::AmpChoice resolve_amp(config::RunConfig& config, const dist::DeviceInfo& devices);

/// amp.mode of the job, the same on every rank (job/amp_agreement.h): rank 0 resolves it
/// (resolve_amp, from rank 0's devices) and every rank takes rank 0's choice, in the first
/// gather on `communicator` (null: this process alone). A decided mode is written into
/// `config`; one that awaits timing leaves amp.mode auto for time_amp.
amp::AmpChoice agree_amp(config::RunConfig& config, const dist::DeviceInfo& devices,
                         dist::Communicator* communicator);

/// One rank, ready to train or benchmark.
struct Rank {
  /// The run directory's lock, when this rank holds it (rank 0 without our launcher); first,
  /// so that it is released last.
  std::shared_ptr<RunDirLock> run_dir_lock;
  config::RunConfig config;  ///< effective config: checkpoint layer, data.max_tokens a number
  train::RunSetup setup;     ///< what the training components take (setup.max_tokens resolved)
  data::PreparedData data;   ///< vocabulary and token caches
  std::optional<LoadedCheckpoint> resume;  ///< the checkpoint to restore, if any
  /// train.init_from's checkpoint when the run starts fresh from it (fine-tuning)
  std::optional<LoadedCheckpoint> init;
  std::optional<train::MaxTokensFit> max_tokens_fit;  ///< what data.max_tokens: auto measured
  amp::AmpChoice amp;  ///< the precision in effect and why (amp.mode resolved)
  std::optional<train::AmpTiming> amp_timing;  ///< what amp.mode auto timed, if it did
};

/// Settles a choice of amp.mode auto that needs timing, on a rank whose setup and data are
/// ready (every rank must call it then; it all-gathers): every rank times the model in fp32
/// and bf16 (train/amp_timing.h), rank 0's times decide, every rank takes rank 0's decision
/// (job/amp_agreement.h) and writes the mode into rank.config and rank.setup (YAML and hash
/// included). Does nothing when rank.amp needs no timing.
void time_amp(Rank& rank);

/// Resolves data.max_tokens of a rank whose setup and data are ready: the configured number,
/// or with auto the measured fit (every rank must call it then; it all-gathers), which is
/// written into rank.config and rank.setup (YAML and hash included): checkpoints store it, so
/// a resumed run plans the same batches.
void resolve_max_tokens(Rank& rank, int64_t ranks_per_device);

/// Sets up this process's rank; `resume` says where it starts (a benchmark passes kNone).
/// `claim`: this process's attempt at the run directory's lock when it made one already
/// (claim_run_dir); without it, set_up_rank makes it.
Rank set_up_rank(const config::TrainCommand& command, config::RunConfig config,
                 const config::ResumeFrom& resume, const dist::DeviceInfo& devices,
                 const dist::WorkerEnv& worker, std::optional<RunDirClaim> claim = std::nullopt);

}  // namespace nmt::job
