#include "train/training_state.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "amp/loss_scaler.h"
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

/// Tensor of a file's bytes (to keep the vocabulary inside the checkpoint).
at::Tensor file_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  NMT_CHECK(in.good(), CheckpointError, "{}: cannot read", file.string());
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

at::Tensor string_bytes(const std::string& bytes) {
  at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

/// The model must have the same tensors of the same shapes: names the first difference.
void check_model_shapes(const checkpoint::CheckpointData& saved, const std::string& where,
                        model::Transformer& model) {
  for (const auto& item : model->named_parameters()) {
    const at::Tensor* t = saved.find("model." + item.key());
    NMT_CHECK(t != nullptr, CheckpointError,
              "{}: no tensor model.{}: the checkpoint is of a different model shape than the "
              "config (model.*)",
              where, item.key());
    NMT_CHECK(t->sizes() == item.value().sizes(), CheckpointError,
              "{}: model.{} has shape {} in the checkpoint but {} in the config's model "
              "(check model.* and data.vocab_size)",
              where, item.key(), shape_string(t->sizes()), shape_string(item.value().sizes()));
  }
}

}  // namespace

uint64_t fresh_rank_seed(int64_t seed, int64_t rank, int64_t step) {
  Fnv1a64 hash;
  hash.update(fmt::format("{}/{}/{}", seed, rank, step));
  return hash.digest();
}

StateTensors gather_rng_states(const Updater& updater) {
  const UpdaterSetup& u = updater.setup();
  StateTensors out;
  for (const auto& [kind, state] : dist::generator_states(u.device)) {
    const std::string bytes(static_cast<const char*>(state.data_ptr()), state.numel());
    const std::vector<std::string> all =
        u.communicator ? u.communicator->all_gather_strings(bytes) : std::vector<std::string>{bytes};
    for (size_t r = 0; r < all.size(); ++r)
      out.emplace_back(fmt::format("rng.{}.{}", kind, r), string_bytes(all[r]));
  }
  return out;
}

checkpoint::CheckpointData make_checkpoint(Updater& updater, StateTensors rng_states,
                                           const data::Vocabularies& vocab,
                                           const checkpoint::RunMetadata& meta) {
  checkpoint::CheckpointData out;
  for (const auto& item : updater.model()->named_parameters())
    out.tensors.emplace_back("model." + item.key(), item.value().detach());
  for (auto& entry : updater.optimizer().state()) out.tensors.push_back(std::move(entry));
  for (auto& entry : updater.scaler().state()) out.tensors.push_back(std::move(entry));
  if (const ParameterAverage* average = updater.average())
    for (auto& entry : average->state()) out.tensors.push_back(std::move(entry));
  for (auto& entry : rng_states) out.tensors.push_back(std::move(entry));
  out.tensors.emplace_back("vocab.src_model", file_bytes(vocab.src.model_path()));
  if (!vocab.joint) out.tensors.emplace_back("vocab.tgt_model", file_bytes(vocab.tgt.model_path()));
  out.metadata = meta.to_map();
  return out;
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
  {
    at::NoGradGuard no_grad;
    for (const auto& item : updater.model()->named_parameters())
      item.value().copy_(saved.at("model." + item.key()));
  }
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
  {
    at::NoGradGuard no_grad;
    for (const auto& item : updater.model()->named_parameters())
      item.value().copy_(saved.at("model." + item.key()));
  }
  auto find = [&saved](std::string_view name) { return saved.find(name); };
  updater.optimizer().load_state(find);
  updater.scaler().load_state(find);
  if (ParameterAverage* average = updater.average()) {
    if (!average->load_state(find))
      log::info("train", "{}: no ema.* tensors (trained without train.ema_decay): the moving "
                "average starts at the restored parameters", where);
  }
  // Random streams last, so nothing above consumes from the restored state. A rank the
  // checkpoint has streams for continues them; a rank beyond the ranks that saved it (a job
  // resumed on more ranks) starts fresh streams seeded from (train.seed, rank, step).
  const bool saved_rank = u.rank < meta.world_size;
  if (!saved_rank) at::manual_seed(fresh_rank_seed(u.train.seed, u.rank, meta.step));
  for (const auto& [kind, state] : dist::generator_states(u.device)) {
    if (saved_rank)
      dist::set_generator_state(kind, u.device, saved.at(fmt::format("rng.{}.{}", kind, u.rank)));
  }
  return meta;
}

}  // namespace nmt::train
