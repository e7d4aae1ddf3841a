#pragma once
// The checks of a run's configuration that involve several keys, made once all sources are
// applied (config/run_config.cpp's load_run_config calls them). Internal to config/.

#include <filesystem>
#include <string>
#include <vector>

#include "config/run_config.h"
#include "config/schema.h"

namespace nmt::config {

/// Throws ConfigError for the first inconsistency between keys (a file that does not exist,
/// both forms of a setting, a value another key rules out), naming the keys and where each
/// was set: its file:line:column, --set, or `file` for a key left at its default.
void validate_run_config(const RunConfig& c, const Schema& s, const std::filesystem::path& file);

/// Settings that are valid but change nothing (data.sampling_temperature with one corpus),
/// one line each naming the key and where it was set.
std::vector<std::string> ineffective_settings(const RunConfig& c, const Schema& s,
                                              const std::filesystem::path& file);

}  // namespace nmt::config
