#include "catch_torch.h"  // first: see the header

#include <filesystem>
#include <string>

#include <ATen/ATen.h>

#include "checkpoint/checkpoint_file.h"
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

}  // namespace

TEST_CASE("stored model: the moving average translates when there is one, else the trained weights",
          "[decode][stored_model]") {
  const auto with_ema = stored_weights(true), without = stored_weights(false);
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
