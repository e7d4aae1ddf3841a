// train/training_state: what a checkpoint holds of a run and how it comes back, exercised on an
// Updater directly (CPU, a model of a few thousand parameters): a checkpoint written before the
// typed layout (tests/train/data/) restores and is written again tensor for tensor, a save and
// restore continues bitwise, a rank or device the checkpoint has no random state for starts
// from the documented seed, and fine-tuning takes the model group only.
#include "catch_torch.h"

#include <algorithm>
#include <filesystem>
#include <string>

#include <ATen/ATen.h>

#include "amp/loss_scaler.h"
#include "checkpoint/checkpoint_file.h"
#include "checkpoint/run_metadata.h"
#include "checkpoint/tensor_groups.h"
#include "config/run_config.h"
#include "data/batch_tensors.h"
#include "data/vocab.h"
#include "dist/random_state.h"
#include "model/transformer.h"
#include "test_support.h"
#include "train/optimizer.h"
#include "train/run_setup.h"
#include "train/training_state.h"
#include "train/updater.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::checkpoint::CheckpointData;
using nmt::checkpoint::TensorGroup;
using nmt::train::Updater;
using nmt::train::UpdaterSetup;
namespace ckpt = nmt::checkpoint;

namespace {

/// Written by nmt-train at d6612cb (before the typed layout); make-legacy-checkpoint.sh.
const std::filesystem::path kLegacy =
    std::filesystem::path(NMT_SOURCE_DIR) / "tests/train/data/legacy-d6612cb.safetensors";

/// A run's vocabulary, taken out of a checkpoint into `dir` (joint).
nmt::data::Vocabularies stored_vocabulary(const CheckpointData& data, const nmt::test::TempDir& dir) {
  const auto file = dir.write(
      "joint.model", ckpt::tensor_bytes(ckpt::tensor_at(data, TensorGroup::kVocabulary,
                                                       ckpt::vocabulary_file::kSource)));
  nmt::data::Vocabularies vocab;
  vocab.src = nmt::data::Vocab::load(file);
  vocab.tgt = vocab.src;
  vocab.joint = true;
  return vocab;
}

/// The Updater of the run whose config a checkpoint stores.
UpdaterSetup setup_of(const CheckpointData& data, const nmt::data::Vocabularies& vocab) {
  const auto meta = ckpt::RunMetadata::parse(data.metadata, data.source.string());
  const nmt::config::RunConfig config = nmt::config::parse_stored_config(meta.config, "legacy");
  UpdaterSetup u;
  u.model = config.model;
  u.train = config.train;
  u.amp = config.amp;
  u.precision = config.amp.mode.value_or(nmt::amp::AmpMode::kOff);
  u.dist = config.dist;
  u.src_vocab_size = vocab.src.size();
  u.tgt_vocab_size = vocab.tgt.size();
  u.pad_id = vocab.src.pad_id();
  return u;
}

/// A small model, with a moving average, that trains on random batches.
UpdaterSetup small_setup(int64_t rank = 0, int64_t world_size = 1) {
  UpdaterSetup u;
  u.model.encoder_layers = 1;
  u.model.decoder_layers = 1;
  u.model.d_model = 16;
  u.model.heads = 2;
  u.model.ffn_dim = 32;
  u.model.max_positions = 32;
  u.train.seed = 5;
  u.train.lr = 0.01;
  u.train.warmup_steps = 1;
  u.train.ema_decay = 0.9;
  u.src_vocab_size = u.tgt_vocab_size = 40;
  u.pad_id = 0;
  u.rank = rank;
  u.world_size = world_size;
  return u;
}

/// `steps` updates on batches drawn from the global generator.
void train(Updater& updater, int64_t first_step, int64_t steps) {
  nmt::train::IntervalStats interval = nmt::train::IntervalStats::zero(updater.setup().device);
  const nmt::train::BatchSource batches = [] { return nmt::data::random_batch(4, 6, 40, 40, 1); };
  for (int64_t step = first_step; step < first_step + steps; ++step)
    updater.update(step, batches, interval, false);
}

ckpt::RunMetadata metadata_at(int64_t step, const nmt::data::Vocabularies& vocab) {
  ckpt::RunMetadata meta;
  meta.step = step;
  meta.epoch = 1;
  meta.world_size = 1;
  meta.update_freq = 1;
  meta.config = "model: {}";
  meta.config_hash = "0";
  meta.vocab_fingerprint = nmt::train::vocab_fingerprint(vocab);
  return meta;
}

/// The bytes of every tensor of a checkpoint, by name, in order.
std::vector<std::pair<std::string, std::string>> contents(const CheckpointData& data) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, tensor] : data.tensors) {
    const at::Tensor bytes = tensor.contiguous().reshape({-1}).view(at::kByte);
    out.emplace_back(name + " " + std::string(ckpt::safetensors_dtype_name(tensor)),
                     ckpt::tensor_bytes(bytes));
  }
  return out;
}

/// A copy that later training cannot change (make_checkpoint's model and ema tensors are
/// views of the live parameters, as they are written at once).
CheckpointData snapshot(CheckpointData data) {
  for (auto& entry : data.tensors) entry.second = entry.second.clone();
  return data;
}

/// A small vocabulary for the checkpoints made here: the legacy checkpoint's.
const nmt::data::Vocabularies& small_vocab() {
  static nmt::test::TempDir dir;
  static const nmt::data::Vocabularies vocab = stored_vocabulary(ckpt::load_checkpoint(kLegacy), dir);
  return vocab;
}

}  // namespace

TEST_CASE("a checkpoint from before the typed layout restores and is written again the same",
          "[train][training_state]") {
  const CheckpointData legacy = ckpt::load_checkpoint(kLegacy);
  nmt::test::TempDir dir;
  const nmt::data::Vocabularies vocab = stored_vocabulary(legacy, dir);
  Updater updater(setup_of(legacy, vocab));
  const ckpt::RunMetadata meta = nmt::train::restore_checkpoint(legacy, kLegacy, updater, vocab);
  CHECK(meta.step == 3);
  // Every group is there: model, optimizer, scaler, ema, rng, vocabulary.
  for (const auto& info : ckpt::kTensorGroups) {
    INFO(info.name);
    CHECK(ckpt::has_group(legacy, info.group));
  }
  // Written again from the restored state: the same tensors, names, dtypes and bytes (the
  // vocabulary comes from the file `vocab` was loaded from, which holds the same bytes).
  const CheckpointData again =
      nmt::train::make_checkpoint(updater, nmt::train::gather_state(updater), vocab, meta);
  CHECK(contents(again) == contents(legacy));
  CHECK(again.metadata == legacy.metadata);
}

TEST_CASE("save, restore into a fresh Updater, and both continue bitwise",
          "[train][training_state]") {
  const nmt::data::Vocabularies& vocab = small_vocab();
  const UpdaterSetup u = small_setup();
  // Both built first: building an Updater seeds the generators.
  Updater first(u);
  Updater second(u);
  train(first, 1, 3);
  const CheckpointData saved = snapshot(nmt::train::make_checkpoint(
      first, nmt::train::gather_state(first), vocab, metadata_at(3, vocab)));
  train(first, 4, 2);  // uninterrupted: batches and dropout from the generator as it was saved
  const CheckpointData a = nmt::train::make_checkpoint(
      first, nmt::train::gather_state(first), vocab, metadata_at(5, vocab));
  nmt::train::restore_checkpoint(saved, "memory", second, vocab);
  train(second, 4, 2);
  const CheckpointData b = nmt::train::make_checkpoint(
      second, nmt::train::gather_state(second), vocab, metadata_at(5, vocab));
  CHECK(contents(a) == contents(b));
  // Training changed the parameters (so the comparison above compares something).
  const auto changed = [&](TensorGroup group) {
    for (const auto& [name, tensor] : ckpt::group_tensors(a, group))
      if (!at::equal(tensor, ckpt::tensor_at(saved, group, name))) return true;
    return false;
  };
  CHECK(changed(TensorGroup::kModel));
  CHECK(changed(TensorGroup::kEma));
  CHECK(changed(TensorGroup::kOptimizer));
}

TEST_CASE("a random stream the checkpoint lacks starts from fresh_rank_seed",
          "[train][training_state]") {
  const nmt::data::Vocabularies& vocab = small_vocab();
  Updater first(small_setup());
  train(first, 1, 1);
  CheckpointData saved = snapshot(nmt::train::make_checkpoint(
      first, nmt::train::gather_state(first), vocab, metadata_at(1, vocab)));
  const uint64_t seed = nmt::train::fresh_rank_seed(5, 0, 1);
  at::manual_seed(seed);
  const at::Tensor expected = at::rand({4});

  SECTION("saved on another kind of device: no cpu stream for this rank") {
    // As a CPU run resumed on a GPU finds no rng.cuda.<rank>: here the cpu one is removed.
    const std::string gone = ckpt::tensor_name(TensorGroup::kRng, ckpt::rng_stream::name("cpu", 0));
    auto& tensors = saved.tensors;
    tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                                 [&](const auto& entry) { return entry.first == gone; }),
                  tensors.end());
    Updater resumed(small_setup());
    at::manual_seed(999);
    nmt::train::restore_checkpoint(saved, "memory", resumed, vocab);
    CHECK(at::equal(at::rand({4}), expected));
  }
  SECTION("a rank beyond those that saved") {
    Updater resumed(small_setup(1, 2));
    at::manual_seed(999);
    nmt::train::restore_checkpoint(saved, "memory", resumed, vocab);
    at::manual_seed(nmt::train::fresh_rank_seed(5, 1, 1));
    const at::Tensor rank1 = at::rand({4});
    nmt::train::restore_checkpoint(saved, "memory", resumed, vocab);
    CHECK(at::equal(at::rand({4}), rank1));
    CHECK_FALSE(at::equal(rank1, expected));
  }
  SECTION("a saved stream this device does not have is ignored") {
    ckpt::add_tensor(saved, TensorGroup::kRng, ckpt::rng_stream::name("cuda", 0),
                     ckpt::bytes_tensor("not a generator state"));
    Updater resumed(small_setup());
    CHECK_NOTHROW(nmt::train::restore_checkpoint(saved, "memory", resumed, vocab));
  }
}

TEST_CASE("fine-tuning takes the model group and nothing else, shapes checked by name",
          "[train][training_state]") {
  const nmt::data::Vocabularies& vocab = small_vocab();
  Updater trained(small_setup());
  train(trained, 1, 2);
  const CheckpointData saved = snapshot(nmt::train::make_checkpoint(
      trained, nmt::train::gather_state(trained), vocab, metadata_at(2, vocab)));
  Updater tuned(small_setup());
  nmt::train::load_initial_parameters(saved, "memory", tuned, vocab);
  for (const auto& item : tuned.model()->named_parameters())
    CHECK(at::equal(item.value(), ckpt::tensor_at(saved, TensorGroup::kModel, item.key())));
  // The optimizer starts fresh: its moments are zeros, not the trained run's.
  for (const auto& [name, tensor] : tuned.optimizer().state()) {
    INFO(name);
    CHECK(tensor.abs().sum().item<double>() == 0.0);
  }
  // Another model shape: the message names the checkpoint tensor and both shapes.
  UpdaterSetup wider = small_setup();
  wider.model.ffn_dim = 48;
  Updater other(wider);
  CHECK_THROWS_WITH(nmt::train::load_initial_parameters(saved, "run/ckpt.safetensors", other, vocab),
                    Contains("run/ckpt.safetensors") && Contains("model.encoder_layers.0") &&
                        Contains("[48, 16]"));
}
