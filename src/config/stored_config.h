#pragma once
// The parts of a configuration stored in a checkpoint ("config" metadata, to_yaml's text) that
// readers outside config/ need on their own: the model options a checkpoint's network is built
// from (nmt-translate's Translator, export-hf) and the model section as YAML (import-hf prints
// it for a fine-tuning config). config/ owns the YAML, so it is read and written here, never
// sliced as text by its users.

#include <string>

#include "config/run_config.h"
#include "model/model_options.h"

namespace nmt::config {

/// The model options of a checkpoint's stored config (see parse_stored_config); the
/// decode::ModelConfigReader that nmt-translate gives the Translator. `origin` names the
/// checkpoint in messages.
model::ModelOptions stored_model_options(const std::string& yaml, const std::string& origin);

/// The model section of `config` as YAML without docs ("model:\n  d_model: 512\n..."),
/// exactly as it appears in to_yaml(config, /*with_docs=*/false).
std::string model_section_yaml(const RunConfig& config);

}  // namespace nmt::config
