#pragma once
// nmt-train --dry-run: the vocabulary, the token cache and the epoch-1 batch plan of every
// rank, planned in this one process, without training; prints a table and writes
// <run_dir>/batch_stats.json and <run_dir>/summary.json.

#include "amp/amp_choice.h"
#include "config/run_config.h"
#include "dist/device.h"
#include "dist/worker_env.h"

namespace nmt::job {

/// Runs the dry run of `config`, whose amp.mode `amp` resolved (summary.json gives it and its
/// reason); returns the exit code.
int dry_run(config::RunConfig config, const amp::AmpChoice& amp, const dist::DeviceInfo& devices,
            const dist::WorkerEnv& worker);

}  // namespace nmt::job
