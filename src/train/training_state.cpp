#include "train/training_state.h"

#include <algorithm>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "amp/loss_scaler.h"
#include "checkpoint/checkpoint_file.h"
#include "checkpoint/run_metadata.h"
#include "checkpoint/tensor_groups.h"
#include "data/vocab.h"
#include "dist/process_group.h"
#include "dist/random_state.h"
#include "model/transformer.h"
#include "train/ema.h"
#include "train/optimizer.h"
#include "train/run_setup.h"
#include "train/updater.h"
#include "util/error.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/shape.h"

namespace nmt::train {
namespace {

using checkpoint::TensorGroup;

/// The model must have the same tensors of the same shapes: names the first difference.
void check_model_shapes(const checkpoint::CheckpointData& saved, const std::string& where,
                        model::Transformer& model) {
  for (const auto& item : model->named_parameters()) {
    const std::string name = checkpoint::tensor_name(TensorGroup::kModel, item.key());
    const at::Tensor* t = checkpoint::find_tensor(saved, TensorGroup::kModel, item.key());
    NMT_CHECK(t != nullptr, CheckpointError,
              "{}: no tensor {}: the checkpoint is of a different model shape than the config "
              "(model.*)",
              where, name);
    NMT_CHECK(t->sizes() == item.value().sizes(), CheckpointError,
              "{}: {} has shape {} in the checkpoint but {} in the config's model (check model.* "
              "and data.vocab_size)",
              where, name, shape_string(t->sizes()), shape_string(item.value().sizes()));
  }
}

/// Copies the model group of `saved` into the model (shapes checked before).
void copy_model_parameters(const checkpoint::CheckpointData& saved, model::Transformer& model) {
  at::NoGradGuard no_grad;
  for (const auto& item : model->named_parameters())
    item.value().copy_(checkpoint::tensor_at(saved, TensorGroup::kModel, item.key()));
}

/// Restores this rank's random streams (see restore_checkpoint for the rule). Last, so that
/// nothing else consumes from the restored state.
void restore_rng_streams(const checkpoint::CheckpointData& saved, const std::string& where,
                         const UpdaterSetup& u, const checkpoint::RunMetadata& meta) {
  const bool saved_rank = u.rank < meta.world_size;
  std::vector<std::pair<std::string, const at::Tensor*>> streams;
  std::vector<std::string> missing;
  for (const auto& [kind, state] : dist::generator_states(u.device)) {
    const std::string name = checkpoint::rng_stream::name(kind, u.rank);
    const at::Tensor* t = saved_rank ? checkpoint::find_tensor(saved, TensorGroup::kRng, name)
                                     : nullptr;
    streams.emplace_back(kind, t);
    if (saved_rank && t == nullptr) missing.push_back(kind);
  }
  // A rank beyond those that saved (a job resumed on more ranks), or a stream the checkpoint
  // lacks (saved on a CPU, resumed on a GPU), starts from (train.seed, rank, step); the
  // streams that were saved are restored over that.
  if (!saved_rank || !missing.empty())
    at::manual_seed(fresh_rank_seed(u.train.seed, u.rank, meta.step));
  for (const auto& [kind, state] : streams)
    if (state != nullptr) dist::set_generator_state(kind, u.device, *state);
  if (!missing.empty())
    log::warn("train", "{}: no saved {} random state for rank {} (saved on another kind of "
              "device): it starts fresh from train.seed, rank and step; the run continues, but "
              "not bit for bit",
              where, fmt::join(missing, ", "), u.rank);
  if (u.rank != 0) return;
  for (const auto& [name, tensor] : checkpoint::group_tensors(saved, TensorGroup::kRng)) {
    const std::string kind = name.substr(0, name.find('.'));
    const bool used = std::any_of(streams.begin(), streams.end(),
                                  [&](const auto& stream) { return stream.first == kind; });
    if (!used) {
      log::info("train", "{}: its {} random states are not used on {}", where, kind,
                u.device.str());
      return;
    }
  }
}

}  // namespace

uint64_t fresh_rank_seed(int64_t seed, int64_t rank, int64_t step) {
  Fnv1a64 hash;
  hash.update(fmt::format("{}/{}/{}", seed, rank, step));
  return hash.digest();
}

checkpoint::NamedTensors gather_rng_states(const Updater& updater) {
  const UpdaterSetup& u = updater.setup();
  checkpoint::NamedTensors out;
  for (const auto& [kind, state] : dist::generator_states(u.device)) {
    const std::string bytes = checkpoint::tensor_bytes(state);
    const std::vector<std::string> all =
        u.communicator ? u.communicator->all_gather_strings(bytes) : std::vector<std::string>{bytes};
    for (size_t r = 0; r < all.size(); ++r)
      out.emplace_back(checkpoint::rng_stream::name(kind, static_cast<int64_t>(r)),
                       checkpoint::bytes_tensor(all[r]));
  }
  return out;
}

GatheredState gather_state(Updater& updater) {
  GatheredState gathered;
  gathered.rng = gather_rng_states(updater);
  gathered.optimizer = updater.optimizer().collect_state(updater.setup().rank == 0);
  return gathered;
}

checkpoint::CheckpointData make_checkpoint(Updater& updater, GatheredState gathered,
                                           const data::Vocabularies& vocab,
                                           const checkpoint::RunMetadata& meta) {
  checkpoint::CheckpointData out;
  for (const auto& item : updater.model()->named_parameters())
    checkpoint::add_tensor(out, TensorGroup::kModel, item.key(), item.value().detach());
  checkpoint::add_tensors(out, TensorGroup::kOptimizer, std::move(gathered.optimizer));
  checkpoint::add_tensors(out, TensorGroup::kScaler, updater.scaler().state());
  if (const ParameterAverage* average = updater.average())
    checkpoint::add_tensors(out, TensorGroup::kEma, average->state());
  checkpoint::add_tensors(out, TensorGroup::kRng, std::move(gathered.rng));
  namespace file = checkpoint::vocabulary_file;
  checkpoint::add_tensor(out, TensorGroup::kVocabulary, file::kSource,
                         checkpoint::file_bytes_tensor(vocab.src.model_path()));
  if (!vocab.joint)
    checkpoint::add_tensor(out, TensorGroup::kVocabulary, file::kTarget,
                           checkpoint::file_bytes_tensor(vocab.tgt.model_path()));
  out.metadata = meta.to_map();
  return out;
}

void check_languages(const checkpoint::RunMetadata& meta, const std::vector<std::string>& languages,
                     const std::string& where, const char* what) {
  const auto list = [](const std::vector<std::string>& l) {
    return l.empty() ? std::string("none") : fmt::format("{}", fmt::join(l, ", "));
  };
  NMT_CHECK(meta.languages == languages, CheckpointError,
            "{}: trained on languages {}, this run names {} (data.train src_lang/tgt_lang): "
            "{} needs the same language list",
            where, list(meta.languages), list(languages), what);
}

void load_initial_parameters(const checkpoint::CheckpointData& saved,
                             const std::filesystem::path& file, Updater& updater,
                             const data::Vocabularies& vocab) {
  const std::string where = file.string();
  check_model_shapes(saved, where, updater.model());
  const checkpoint::RunMetadata meta = checkpoint::RunMetadata::parse(saved.metadata, where);
  NMT_CHECK(meta.vocab_fingerprint.empty() || meta.vocab_fingerprint == vocab_fingerprint(vocab),
            CheckpointError,
            "{}: its vocabulary (fingerprint {}) is not this run's ({}, {}): fine-tuning needs the "
            "checkpoint's vocabulary",
            where, meta.vocab_fingerprint, vocab_fingerprint(vocab), vocab.src.model_path().string());
  copy_model_parameters(saved, updater.model());
  if (ParameterAverage* average = updater.average()) average->restart();
}

checkpoint::RunMetadata restore_checkpoint(const checkpoint::CheckpointData& saved,
                                           const std::filesystem::path& file, Updater& updater,
                                           const data::Vocabularies& vocab) {
  const std::string where = file.string();
  const UpdaterSetup& u = updater.setup();
  check_model_shapes(saved, where, updater.model());
  const checkpoint::RunMetadata meta = checkpoint::RunMetadata::parse_resumable(saved.metadata, where);
  NMT_CHECK(meta.vocab_fingerprint == vocab_fingerprint(vocab), CheckpointError,
            "{}: vocabulary differs: checkpoint fingerprint {}, this run's {} ({})", where,
            meta.vocab_fingerprint, vocab_fingerprint(vocab), vocab.src.model_path().string());
  NMT_CHECK(meta.update_freq > 0 || meta.world_size == u.world_size, CheckpointError,
            "{}: saved with {} ranks by a version that did not record update_freq, resumed with "
            "{}: resume it with {} ranks",
            where, meta.world_size, u.world_size, meta.world_size);
  copy_model_parameters(saved, updater.model());
  updater.optimizer().load_state(checkpoint::group_finder(saved, TensorGroup::kOptimizer));
  updater.scaler().load_state(checkpoint::group_finder(saved, TensorGroup::kScaler));
  if (ParameterAverage* average = updater.average()) {
    if (!average->load_state(checkpoint::group_finder(saved, TensorGroup::kEma)))
      log::info("train", "{}: no {}* tensors (trained without train.ema_decay): the moving "
                "average starts at the restored parameters",
                where, checkpoint::group_prefix(TensorGroup::kEma));
  }
  restore_rng_streams(saved, where, u, meta);
  return meta;
}

}  // namespace nmt::train
