#include "train/run_setup.h"

#include <fmt/format.h>

#include "data/batch_tensors.h"
#include "data/prepare.h"
#include "data/vocab.h"

namespace nmt::train {

std::string vocab_fingerprint(const data::Vocabularies& vocab) {
  return data::vocabularies_fingerprint(vocab);
}

data::SpecialIds batch_ids(const model::ModelOptions& model, const data::Vocabularies& vocab) {
  const data::Vocab& tgt = vocab.tgt;
  return {vocab.src.pad_id(),
          model::decoder_start_id(model.decoder_start, tgt.bos_id(), tgt.eos_id(), tgt.pad_id()),
          tgt.eos_id()};
}

UpdaterSetup updater_setup(const RunSetup& run, const data::Vocabularies& vocab) {
  UpdaterSetup u;
  u.model = run.model;
  u.train = run.train;
  u.amp = run.amp;
  u.precision = run.precision;
  u.dist = run.dist;
  u.src_vocab_size = vocab.src.size();
  u.tgt_vocab_size = vocab.tgt.size();
  u.pad_id = vocab.src.pad_id();
  u.max_tokens = run.max_tokens;
  u.update_freq = data::resolve_update_freq(run.data, run.max_tokens, run.world_size);
  u.rank = run.rank;
  u.world_size = run.world_size;
  u.device = run.device;
  u.communicator = run.communicator;
  u.identity = fmt::format("config {} | vocabulary {}", run.config_hash, vocab_fingerprint(vocab));
  u.oom_faults = oom_faults_from_environment();
  return u;
}

std::shared_ptr<const data::BatchPlanner> train_planner(const RunSetup& run,
                                                        const data::PreparedData& data) {
  const data::BatchPlanOptions options = data::plan_options(
      run.data, run.max_tokens, run.world_size, static_cast<uint64_t>(run.train.seed));
  if (run.planner && run.planner->options() == options) return run.planner;
  // The ranks of a node share each epoch's plan through a file beside the token cache: one
  // plans, the others map it (data/plan_file.h).
  std::filesystem::path plan_dir;
  if (!run.run_dir.empty()) plan_dir = run.run_dir / "cache";
  return std::make_shared<const data::BatchPlanner>(data.train, options, plan_dir);
}

std::unique_ptr<data::BatchPrefetcher> first_epoch_batches(const RunSetup& run,
                                                           const data::PreparedData& data) {
  return std::make_unique<data::BatchPrefetcher>(
      data.train, train_planner(run, data), run.rank, data::IteratorState{},
      batch_ids(run.model, data.vocab), run.data.prefetch, /*pin_memory=*/run.device.is_cuda());
}

}  // namespace nmt::train
