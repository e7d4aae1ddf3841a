#pragma once
// Everything one rank's run is built from (the training loop, the benchmark and the
// max_tokens auto fit take it), and the pieces of it that each component needs.

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

/// One rank's run.
struct RunSetup {
  model::ModelOptions model;
  data::DataOptions data;           ///< as configured: read max_tokens below, not data.max_tokens
  /// Padded tokens per batch per rank: data.max_tokens, or what its auto resolved to
  /// (max_tokens_fit.h; while that measures, unmeasured_max_tokens()).
  int64_t max_tokens = 4096;
  TrainOptions train;
  amp::AmpOptions amp;
  checkpoint::CheckpointOptions checkpoint;
  dist::DistOptions dist;           ///< bucket size and overlap of the gradient all-reduce
  std::filesystem::path run_dir;    ///< checkpoints/, metrics.jsonl and summary.json go here
  std::string config_yaml;          ///< effective config, stored in every checkpoint
  std::string config_hash;          ///< config_hash() of it
  int64_t rank = 0;                 ///< this process's rank
  int64_t world_size = 1;           ///< ranks in the job
  c10::Device device = c10::Device(c10::kCPU);  ///< where the model trains
  int64_t ranks_on_device = 1;      ///< ranks sharing this rank's GPU (1 on CPU): MFU's peak
  /// The process group of the ranks (null for one process): gradients are summed over it.
  std::shared_ptr<dist::Communicator> communicator;
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
