#pragma once
// The effective configuration of a run: every component's Options, read once at start-up
// from defaults < YAML file < checkpoint (on resume) < --set overrides, and validated.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "amp/amp_options.h"
#include "checkpoint/checkpoint_options.h"
#include "data/data_options.h"
#include "dist/dist_options.h"
#include "model/model_options.h"
#include "train/train_options.h"
#include "util/log.h"

namespace nmt::config {

/// All settings of a training run, one typed Options struct per component.
struct RunConfig {
  std::string run_dir;  ///< logs, vocabulary, token cache, checkpoints, metrics.jsonl
  model::ModelOptions model;
  data::DataOptions data;
  train::TrainOptions train;
  amp::AmpOptions amp;
  dist::DistOptions dist;
  checkpoint::CheckpointOptions checkpoint;
  log::LogOptions log;
};

/// The sources of a run's configuration, lowest precedence first.
struct ConfigSources {
  std::filesystem::path file;                  ///< the --config YAML file
  std::optional<std::string> checkpoint_yaml;  ///< config saved in the checkpoint resumed from
  std::string checkpoint_name;                 ///< that checkpoint's path, for messages
  std::vector<std::string> overrides;          ///< --set key=value, applied in order
};

/// Reads, merges and validates the configuration. Throws ConfigError naming the file,
/// line:column and key of the first problem. With `warnings`, appends a line for each
/// setting that is valid but has no effect, naming its key and where it was set (for the
/// caller to log once per run, not once per rank).
RunConfig load_run_config(const ConfigSources& sources, std::vector<std::string>* warnings = nullptr);

/// A configuration stored in a checkpoint ("config" metadata): built-in defaults, then that
/// YAML through the same schema and checks. Input files are not required to exist (a model is
/// used where its training data may be absent). `origin` names the checkpoint in messages.
RunConfig parse_stored_config(const std::string& yaml, const std::string& origin);

/// The first difference in the model's shape (layers, widths, heads, norm position, position
/// encoding, embedding tying, activation) between the config a run was started with and one
/// stored in a checkpoint, as "model.d_model is 256 in the checkpoint but 512 in this run's
/// config"; nullopt when they describe the same network. Dropout and other settings that do not change the network are
/// not compared.
std::optional<std::string> model_difference(const RunConfig& here, const RunConfig& stored);

/// The configuration as YAML; with docs, each field carries its doc as a comment. Loading
/// the text again gives the same configuration.
std::string to_yaml(const RunConfig& config, bool with_docs = true);

/// A stable 64-bit hash of the settings that change what a run computes (all but run_dir,
/// log and checkpoint cadence), as 16 hex digits. Ranks compare it before training together.
std::string config_hash(const RunConfig& config);

}  // namespace nmt::config
