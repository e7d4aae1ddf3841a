#include "job/resume_policy.h"

#include <map>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/run_metadata.h"
#include "train/metrics_log.h"
#include "util/error.h"
#include "util/log.h"

namespace nmt::job {
namespace {

checkpoint::CheckpointDir checkpoint_dir(const config::RunConfig& config) {
  return checkpoint::CheckpointDir(std::filesystem::path(config.run_dir) / "checkpoints",
                                   config.checkpoint);
}

/// run_dir's checkpoints, newest first, each with whether its metadata reads (files at or
/// before `stop_at` are listed without reading them: the policy does not look past it).
std::vector<ListedCheckpoint> list_checkpoints(const config::RunConfig& config,
                                               std::optional<int64_t> stop_at) {
  std::vector<ListedCheckpoint> listing;
  for (const auto& file : checkpoint_dir(config).list()) {
    ListedCheckpoint entry{file, checkpoint::step_of_checkpoint_file(file).value_or(0), true};
    if (!stop_at || entry.step > *stop_at) {
      try {
        checkpoint::read_checkpoint_metadata(file);
      } catch (const Error&) {
        entry.readable = false;  // damaged: an older save of the job's
      }
    }
    listing.push_back(std::move(entry));
  }
  return listing;
}

/// `sources` read again with a checkpoint's config between the file and --set.
config::RunConfig with_checkpoint_config(const config::ConfigSources& sources,
                                         const std::filesystem::path& file,
                                         const std::map<std::string, std::string>& metadata) {
  config::ConfigSources with_checkpoint = sources;
  with_checkpoint.checkpoint_name = file.string();
  with_checkpoint.checkpoint_yaml =
      checkpoint::RunMetadata::parse(metadata, with_checkpoint.checkpoint_name).config;
  return config::load_run_config(with_checkpoint);
}

}  // namespace

config::ResumeFrom restart_point(const std::vector<ListedCheckpoint>& newest_first,
                                 std::optional<int64_t> started_at,
                                 const config::ResumeFrom& given) {
  using Mode = config::ResumeFrom::Mode;
  if (given.mode == Mode::kAuto) return given;
  for (const ListedCheckpoint& file : newest_first) {
    if (started_at && file.step <= *started_at) break;
    // Named, so that it loads as --resume PATH does: auto would check it against the YAML's
    // model, not the run's.
    if (file.readable) return {Mode::kPath, file.path.string()};
  }
  return given;
}

std::optional<int64_t> replaced_after(const config::ResumeFrom& from) {
  using Mode = config::ResumeFrom::Mode;
  if (from.mode == Mode::kNone) return 0;
  if (from.mode == Mode::kAuto) return std::nullopt;
  try {
    return checkpoint::RunMetadata::parse(checkpoint::read_checkpoint_metadata(from.path),
                                          from.path)
        .step;
  } catch (const Error&) {
    return checkpoint::step_of_checkpoint_file(from.path);  // deleted since, e.g. by retention
  }
}

ResumePoint resume_point(const config::ConfigSources& sources, config::RunConfig config,
                         const config::ResumeFrom& from) {
  ResumePoint point;
  point.checkpoint = find_resume_checkpoint(config, from);
  point.config = resumed_config(sources, std::move(config), point.checkpoint);
  if (point.checkpoint) restart_best_record_if_ranked_otherwise(*point.checkpoint, point.config);
  return point;
}

std::optional<LoadedCheckpoint> find_resume_checkpoint(const config::RunConfig& config,
                                                       const config::ResumeFrom& from) {
  using Mode = config::ResumeFrom::Mode;
  switch (from.mode) {
    case Mode::kNone:
      return std::nullopt;
    case Mode::kPath:
      return LoadedCheckpoint{from.path, checkpoint::map_checkpoint(from.path)};
    case Mode::kAuto:
      break;
  }
  // A checkpoint of another model (one copied in, or a config changed since) is passed over
  // for an older one that fits.
  const auto other_model = [&config](const checkpoint::CheckpointData& data) {
    const checkpoint::RunMetadata meta =
        checkpoint::RunMetadata::parse_resumable(data.metadata, data.source.string());
    return config::model_difference(config, config::parse_stored_config(meta.config, "checkpoint"));
  };
  auto newest = checkpoint_dir(config).load_newest_valid(other_model);
  if (!newest) return std::nullopt;
  return LoadedCheckpoint{std::move(newest->first), std::move(newest->second)};
}

config::ResumeFrom resume_after_restart(const config::RunConfig& config,
                                        const config::ResumeFrom& given) {
  if (given.mode == config::ResumeFrom::Mode::kAuto) return given;
  const std::optional<int64_t> started_at = replaced_after(given);
  return restart_point(list_checkpoints(config, started_at), started_at, given);
}

std::optional<std::filesystem::path> set_aside_replaced_checkpoints(
    const config::RunConfig& config, const config::ResumeFrom& from) {
  const std::optional<int64_t> step = replaced_after(from);
  if (!step) return std::nullopt;
  const auto folder = checkpoint_dir(config).set_aside_after(*step);
  if (folder) train::set_aside_records_after(config.run_dir, *step, *folder);
  return folder;
}

config::RunConfig config_to_resume(const config::ConfigSources& sources,
                                   const config::RunConfig& config,
                                   const config::ResumeFrom& from) {
  using Mode = config::ResumeFrom::Mode;
  std::vector<std::filesystem::path> candidates;
  if (from.mode == Mode::kPath) {
    candidates.emplace_back(from.path);
  } else if (from.mode == Mode::kAuto) {
    try {
      candidates = checkpoint_dir(config).list();
    } catch (const Error&) {
      return config;  // an unreadable folder: the workers say so
    }
  }
  for (const auto& file : candidates) {
    try {
      return with_checkpoint_config(sources, file, checkpoint::read_checkpoint_metadata(file));
    } catch (const Error&) {
      // A damaged file, or a config that no longer loads: the workers pass over it or stop,
      // naming it.
    }
  }
  return config;
}

bool restart_best_record_if_ranked_otherwise(LoadedCheckpoint& resume,
                                             const config::RunConfig& config) {
  auto& metadata = resume.data.metadata;
  const std::string name = resume.path.string();
  const config::RunConfig saved =
      config::parse_stored_config(checkpoint::RunMetadata::parse(metadata, name).config, name);
  const train::TrainOptions &was = saved.train, &now = config.train;
  if (was.best_metric == now.best_metric && was.best_set == now.best_set) return false;
  const bool had_best = metadata.erase(std::string(checkpoint::meta_key::kBestSelection)) > 0;
  metadata.erase(std::string(checkpoint::meta_key::kWithoutImprovement));
  const auto ranking = [](const train::TrainOptions& t) {
    const char* metric = t.best_metric == train::BestMetric::kBleu   ? "bleu"
                         : t.best_metric == train::BestMetric::kChrf ? "chrf"
                                                                     : "loss";
    return t.best_set.empty() ? fmt::format("{} of the first validation set", metric)
                              : fmt::format("{} of validation set '{}'", metric, t.best_set);
  };
  log::warn("train",
            "{}: its run ranked checkpoints by {} (train.best_metric, best_set), this one by {}: "
            "the best so far and the patience count start over{} (checkpoints already saved "
            "keep their own selection, which keep_best and nmt-translate -c RUN_DIR compare)",
            name, ranking(was), ranking(now), had_best ? "" : " (it had none yet)");
  return true;
}

config::RunConfig resumed_config(const config::ConfigSources& sources, config::RunConfig config,
                                 const std::optional<LoadedCheckpoint>& resume) {
  if (!resume) return config;
  return with_checkpoint_config(sources, resume->path, resume->data.metadata);
}

}  // namespace nmt::job
