#pragma once
// Where a run resumes, what it sets aside, and with which config: the resume policy of
// nmt-train, from --resume (none, auto, PATH), the restart count and the checkpoints in
// run_dir. The decisions are pure functions over a listing of checkpoint files
// (restart_point, replaced_after), so they are tested without ranks or files; the functions
// around them read run_dir and load what was chosen.
//
//   ResumeFrom from = resume_after_restart(config, command.resume);   // a restarted worker
//   ResumePoint point = resume_point(command.sources, config, from);  // checkpoint + config

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "config/run_config.h"
#include "config/train_cli.h"
#include "job/fine_tune.h"

namespace nmt::job {

/// A checkpoint file of run_dir as the policy sees it.
struct ListedCheckpoint {
  std::filesystem::path path;  ///< the file
  int64_t step = 0;            ///< its step, from its name
  bool readable = true;        ///< its metadata reads (a damaged file's does not)
};

/// What a restarted worker resumes from, given the listing newest first: the newest readable
/// file whose step is after `started_at` (the step the job started at; nullopt: unknown, any
/// readable file), named as a file; else `given`. --resume auto stays auto.
config::ResumeFrom restart_point(const std::vector<ListedCheckpoint>& newest_first,
                                 std::optional<int64_t> started_at,
                                 const config::ResumeFrom& given);

/// The step a run of `from` starts at, the later checkpoints of run_dir being the replaced
/// run's: 0 for none, the checkpoint's for a file (from its metadata, else its name, when
/// retention has deleted it since); nullopt for auto, which replaces nothing, or a file that
/// is gone and unnamed.
std::optional<int64_t> replaced_after(const config::ResumeFrom& from);

/// Where a worker resumes: the checkpoint it restores (none for a fresh start) and the run's
/// effective config (the checkpoint's between the file and --set).
struct ResumePoint {
  std::optional<LoadedCheckpoint> checkpoint;  ///< the checkpoint to restore, if any
  config::RunConfig config;                    ///< the effective config
};

/// The resume point of `from` (find_resume_checkpoint, then resumed_config), the best record
/// started over when the run ranks checkpoints otherwise
/// (restart_best_record_if_ranked_otherwise).
ResumePoint resume_point(const config::ConfigSources& sources, config::RunConfig config,
                         const config::ResumeFrom& from);

/// The checkpoint a run resumes from: none; the newest one under run_dir/checkpoints that
/// loads, verifies and is of this config's model (newer files that are not are skipped with a
/// warning naming them); or the given file, which must load.
std::optional<LoadedCheckpoint> find_resume_checkpoint(const config::RunConfig& config,
                                                       const config::ResumeFrom& from);

/// What a worker restarted after a failure (TORCHELASTIC_RESTART_COUNT > 0, from our launcher's
/// --max-restarts or torchrun's) resumes from: restart_point over run_dir's checkpoints, the
/// job having started at replaced_after(given). Later checkpoints of the run it replaced were
/// set aside before it started (set_aside_replaced_checkpoints), so these are the job's.
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

/// Moves the checkpoints of later steps than replaced_after(from) into
/// checkpoints/superseded-<time>/ with a warning, their records of metrics.jsonl and
/// tensorboard/ with them (train::set_aside_records_after), and returns that folder. The
/// built-in launcher calls it before its workers start, so that a restart after a failure
/// early in the first attempt does not take the replaced run's; the trainer's rank 0 does the
/// same at its start for runs without our launcher.
std::optional<std::filesystem::path> set_aside_replaced_checkpoints(const config::RunConfig& config,
                                                                    const config::ResumeFrom& from);

/// The effective config of a run: `config` itself when it starts fresh; when it resumes, the
/// sources read again with the checkpoint's config between the file and --set.
config::RunConfig resumed_config(const config::ConfigSources& sources, config::RunConfig config,
                                 const std::optional<LoadedCheckpoint>& resume);

}  // namespace nmt::job
