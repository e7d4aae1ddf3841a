#pragma once
// Everything one rank's run is built from (the training loop, the benchmark and the
// max_tokens auto fit take it): where it runs (RankContext) and what it runs (RunSettings, every
// `auto` settled), and the pieces of it that each component needs.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <c10/core/Device.h>

#include "amp/amp_options.h"
#include "checkpoint/checkpoint_options.h"
#include "data/data_options.h"
#include "dist/dist_options.h"
#include "model/model_options.h"
#include "train/train_options.h"
#include "train/updater.h"

namespace nmt::data {
class BatchPlanner;
class BatchPrefetcher;
struct SpecialIds;
struct PreparedData;
struct Vocabularies;
}
namespace nmt::dist {
class Communicator;
}

namespace nmt::train {

/// Where one rank runs, made once at start-up before any `auto` is settled: the measurements
/// that settle them (amp.mode's timing, data.max_tokens' fit) run there too.
struct RankContext {
  int64_t rank = 0;                 ///< this process's rank
  int64_t world_size = 1;           ///< ranks in the job
  c10::Device device = c10::Device(c10::kCPU);  ///< where the model trains
  int64_t ranks_on_device = 1;      ///< ranks sharing this rank's GPU (1 on CPU): MFU's peak
  /// The process group of the ranks (null for one process): gradients are summed over it.
  std::shared_ptr<dist::Communicator> communicator;
};

/// What a rank runs: the effective config with every `auto` settled into a plain value
/// (job/rank_setup.h settles them, then makes these once).
struct RunSettings {
  model::ModelOptions model;
  data::DataOptions data;           ///< as settled: data.max_tokens is max_tokens below
  TrainOptions train;
  amp::AmpOptions amp;              ///< the loss scaler's settings; amp.mode is precision below
  checkpoint::CheckpointOptions checkpoint;
  dist::DistOptions dist;           ///< bucket size and overlap of the gradient all-reduce
  std::filesystem::path run_dir;    ///< checkpoints/, metrics.jsonl and summary.json go here
  int64_t max_tokens = 4096;        ///< padded tokens per batch per rank
  amp::AmpMode precision = amp::AmpMode::kOff;  ///< the mode autocast and the scaler run in
  std::string config_yaml;          ///< the settled config, stored in every checkpoint
  std::string config_hash;          ///< config_hash() of it
};

/// One rank's run: where it runs and what it runs.
struct RunSetup : RankContext, RunSettings {
  /// The planner of data.train's epochs, shared by what iterates them on this rank (amp.mode
  /// auto's timing, then the Trainer), so epoch 1 is planned once; null until
  /// train_planner() makes one. Copies of the setup share it.
  std::shared_ptr<const data::BatchPlanner> planner;
};

/// The fingerprint of the vocabulary (both models' when they are separate).
std::string vocab_fingerprint(const data::Vocabularies& vocab);

/// The ids batches are built with: the source padding, the target EOS, and the decoder start
/// model.decoder_start names.
data::SpecialIds batch_ids(const model::ModelOptions& model, const data::Vocabularies& vocab);

/// What the Updater of this run is built from.
UpdaterSetup updater_setup(const RunSetup& run, const data::Vocabularies& vocab);

/// run.planner when it plans with run's current options (max_tokens among them), else a new
/// planner of data.train with them.
std::shared_ptr<const data::BatchPlanner> train_planner(const RunSetup& run,
                                                        const data::PreparedData& data);

/// This rank's batches from the start of epoch 1 of `data.train`, as training draws them
/// (planned by train_planner, prefetched on a thread): what the benchmark and amp.mode auto's
/// timing run on.
std::unique_ptr<data::BatchPrefetcher> first_epoch_batches(const RunSetup& run,
                                                           const data::PreparedData& data);

}  // namespace nmt::train
