#include "catch_torch.h"  // first: see the header

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/checkpoint_fixture.h"
#include "checkpoint/tensor_groups.h"
#include "decode/stored_model.h"
#include "spm_fixture.h"
#include "test_support.h"
#include "util/error.h"

namespace ckpt = nmt::checkpoint;
using ckpt::TensorGroup;
using nmt::decode::WeightsChoice;

namespace {

/// A checkpoint's tensors as training writes them: the model's, and the moving average's
/// when `with_ema`.
ckpt::CheckpointData stored_weights(bool with_ema) {
  ckpt::CheckpointData data;
  ckpt::add_tensor(data, TensorGroup::kModel, "proj.weight", at::ones({2, 2}));
  if (with_ema) ckpt::add_tensor(data, TensorGroup::kEma, "proj.weight", at::zeros({2, 2}));
  return data;
}

/// The checkpoint names of `data`'s tensors, in order.
std::vector<std::string> tensor_names(const ckpt::CheckpointData& data) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : data.tensors) names.push_back(name);
  return names;
}

}  // namespace

TEST_CASE("stored model: the moving average translates when there is one, else the trained weights",
          "[decode][stored_model]") {
  const auto with_ema = tensor_names(stored_weights(true));
  const auto without = tensor_names(stored_weights(false));
  CHECK(nmt::decode::weights_group(with_ema, WeightsChoice::kAuto, "a.safetensors") ==
        TensorGroup::kEma);
  CHECK(nmt::decode::weights_group(without, WeightsChoice::kAuto, "a.safetensors") ==
        TensorGroup::kModel);
  CHECK(nmt::decode::weights_group(with_ema, WeightsChoice::kRaw, "a.safetensors") ==
        TensorGroup::kModel);
  CHECK(nmt::decode::weights_group(with_ema, WeightsChoice::kEma, "a.safetensors") ==
        TensorGroup::kEma);
  CHECK_THROWS_AS(nmt::decode::weights_group(without, WeightsChoice::kEma, "a.safetensors"),
                  nmt::CheckpointError);
  CHECK_THROWS_WITH(
      nmt::decode::weights_group(without, WeightsChoice::kEma, "run/step-10.safetensors"),
      Catch::Contains("--weights ema: run/step-10.safetensors has no ema.* tensors") &&
          Catch::Contains("use --weights raw"));
}

TEST_CASE("stored model: a vocabulary comes back from its tensor, a missing one is named",
          "[decode][stored_model]") {
  nmt::test::TempDir dir;
  const std::filesystem::path model = nmt::test::train_user_defined_tag_vocab(
      std::string(NMT_SOURCE_DIR) + "/data/ddtp.en-de.test.en", dir.path() / "joint", {"<2de>"},
      200);
  ckpt::CheckpointData data = stored_weights(false);
  data.source = "a.safetensors";  // as load_checkpoint sets it: messages name the file
  ckpt::add_tensor(data, TensorGroup::kVocabulary, ckpt::vocabulary_file::kSource,
                   ckpt::file_bytes_tensor(model));
  const nmt::data::Vocab vocab =
      nmt::decode::stored_vocabulary(data, ckpt::vocabulary_file::kSource, "a.safetensors");
  CHECK(vocab.size() == 200);
  CHECK_THROWS_AS(
      nmt::decode::stored_vocabulary(data, ckpt::vocabulary_file::kTarget, "a.safetensors"),
      nmt::CheckpointError);
  CHECK_THROWS_WITH(
      nmt::decode::stored_vocabulary(data, ckpt::vocabulary_file::kTarget, "a.safetensors"),
      Catch::Contains("a.safetensors") && Catch::Contains("tgt_model"));
}

namespace {

/// A checkpoint file as training writes it: the optimizer's state first (its bytes come first
/// in the data section: the tensors are float32 alike), the model's and, `with_ema`, the
/// moving average's weights, and a vocabulary file.
std::filesystem::path save_training_checkpoint(const nmt::test::TempDir& dir, bool with_ema) {
  ckpt::CheckpointData data;
  ckpt::add_tensor(data, TensorGroup::kOptimizer, "proj.weight.exp_avg", at::full({2, 2}, 3.0f));
  ckpt::add_tensor(data, TensorGroup::kOptimizer, "proj.weight.exp_avg_sq", at::full({2, 2}, 4.0f));
  for (const auto& [name, tensor] : stored_weights(with_ema).tensors)
    data.tensors.emplace_back(name, tensor);
  ckpt::add_tensor(data, TensorGroup::kVocabulary, ckpt::vocabulary_file::kSource,
                   ckpt::bytes_tensor("spm"));
  data.metadata["step"] = "10";
  const auto file = dir.path() / (with_ema ? "ema.safetensors" : "raw.safetensors");
  ckpt::save_checkpoint(file, data);
  return file;
}

}  // namespace

TEST_CASE(
    "stored model: translating loads the chosen weights and the vocabulary, never the optimizer "
    "state",
    "[decode][stored_model]") {
  nmt::test::TempDir dir;
  const auto with_ema = save_training_checkpoint(dir, true);
  const auto raw = save_training_checkpoint(dir, false);
  const nmt::decode::StoredWeights average =
      nmt::decode::load_stored_weights(with_ema, WeightsChoice::kAuto);
  CHECK(average.group == TensorGroup::kEma);
  CHECK(tensor_names(average.data) ==
        std::vector<std::string>{"ema.proj.weight", "vocab.src_model"});
  CHECK(at::equal(average.data.tensors[0].second, at::zeros({2, 2})));
  CHECK(average.data.metadata.at("step") == "10");
  const nmt::decode::StoredWeights trained =
      nmt::decode::load_stored_weights(with_ema, WeightsChoice::kRaw);
  CHECK(trained.group == TensorGroup::kModel);
  CHECK(tensor_names(trained.data) ==
        std::vector<std::string>{"model.proj.weight", "vocab.src_model"});
  CHECK(at::equal(trained.data.tensors[0].second, at::ones({2, 2})));
  CHECK(nmt::decode::load_stored_weights(raw, WeightsChoice::kAuto).group == TensorGroup::kModel);
  CHECK_THROWS_WITH(nmt::decode::load_stored_weights(raw, WeightsChoice::kEma),
                    Catch::Contains("--weights ema: " + raw.string() + " has no ema.* tensors"));
  // The optimizer's bytes are still checked: one flipped there refuses the file.
  std::ifstream in(raw, std::ios::binary);
  uint64_t header_bytes = 0;
  in.read(reinterpret_cast<char*>(&header_bytes), sizeof(header_bytes));
  in.close();
  nmt::test::flip_byte(raw, static_cast<std::streamoff>(8 + header_bytes + 1));
  CHECK_THROWS_WITH(nmt::decode::load_stored_weights(raw, WeightsChoice::kAuto),
                    Catch::Contains("checksum mismatch"));
}
