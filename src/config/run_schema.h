#pragma once
// The one list of a run's keys (run_config.cpp's bind) and the defaults they start from, for
// config/'s own use: load_run_config applies the sources through it, config_reference.cpp
// prints it as Markdown. Internal to config/ (and its tests), as schema.h is.

#include <filesystem>

#include "config/run_config.h"
#include "config/schema.h"

namespace nmt::config {

/// Binds every configurable field of `config` to its key, doc and bounds, in the order the
/// reference and --print-config list them. The returned schema writes into `config`.
Schema bind(RunConfig& config);

/// The built-in defaults of a run read from `config_file`: run_dir is runs/<file name without
/// extension>, amp.mode is auto (left to the hardware); everything else as the Options structs
/// declare it.
RunConfig default_run_config(const std::filesystem::path& config_file);

}  // namespace nmt::config
