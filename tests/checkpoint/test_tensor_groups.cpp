// checkpoint/tensor_layout.h and tensor_groups.h: one table of tensor names, groups in and out
// of a checkpoint, the bytes helpers, and the JSON that `nmt-ckpt layout` prints.
#include "catch_torch.h"

#include <set>

#include <nlohmann/json.hpp>
#include "checkpoint/tensor_groups.h"
#include "test_support.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::checkpoint::CheckpointData;
using nmt::checkpoint::TensorGroup;
namespace ckpt = nmt::checkpoint;

TEST_CASE("the layout: one row per group, in enum order, prefixes distinct", "[checkpoint][layout]") {
  std::set<std::string_view> prefixes;
  for (size_t i = 0; i < ckpt::kTensorGroups.size(); ++i) {
    CHECK(static_cast<size_t>(ckpt::kTensorGroups[i].group) == i);
    CHECK(prefixes.insert(ckpt::kTensorGroups[i].prefix).second);
    CHECK(ckpt::kTensorGroups[i].prefix.back() == '.');
  }
  // The names on disk since the first checkpoint format: changing one breaks every checkpoint.
  CHECK(ckpt::group_prefix(TensorGroup::kModel) == "model.");
  CHECK(ckpt::group_prefix(TensorGroup::kEma) == "ema.");
  CHECK(ckpt::group_prefix(TensorGroup::kOptimizer) == "optim.");
  CHECK(ckpt::group_prefix(TensorGroup::kScaler) == "scaler.");
  CHECK(ckpt::group_prefix(TensorGroup::kRng) == "rng.");
  CHECK(ckpt::group_prefix(TensorGroup::kVocabulary) == "vocab.");
  CHECK(ckpt::tensor_name(TensorGroup::kOptimizer,
                          ckpt::optimizer_slot::name(ckpt::optimizer_slot::kExpAvgSq, "a.b")) ==
        "optim.exp_avg_sq.a.b");
  CHECK(ckpt::tensor_name(TensorGroup::kRng, ckpt::rng_stream::name("cuda", 3)) == "rng.cuda.3");
  CHECK(ckpt::tensor_name(TensorGroup::kVocabulary, ckpt::vocabulary_file::kTarget) ==
        "vocab.tgt_model");
  CHECK(ckpt::in_group(TensorGroup::kEma, "ema.x"));
  CHECK_FALSE(ckpt::in_group(TensorGroup::kEma, "model.ema.x"));
  CHECK(ckpt::name_in_group(TensorGroup::kModel, "model.encoder.w") == "encoder.w");
}

TEST_CASE("groups go in under their prefix and come out by their own names",
          "[checkpoint][layout]") {
  CheckpointData data;
  ckpt::add_tensors(data, TensorGroup::kModel, {{"w", at::ones({2})}, {"b", at::zeros({1})}});
  ckpt::add_tensor(data, TensorGroup::kEma, "w", at::full({2}, 3.0));
  ckpt::add_tensor(data, TensorGroup::kModel, "emb", at::full({1}, 7.0));
  REQUIRE(data.tensors.size() == 4);
  CHECK(data.tensors[0].first == "model.w");
  CHECK(data.tensors[2].first == "ema.w");

  const ckpt::NamedTensors model = ckpt::group_tensors(data, TensorGroup::kModel);
  REQUIRE(model.size() == 3);
  CHECK(model[0].first == "w");
  CHECK(model[2].first == "emb");
  CHECK(ckpt::has_group(data, TensorGroup::kEma));
  CHECK_FALSE(ckpt::has_group(data, TensorGroup::kOptimizer));
  REQUIRE(ckpt::find_tensor(data, TensorGroup::kEma, "w") != nullptr);
  CHECK(ckpt::find_tensor(data, TensorGroup::kEma, "w")->sum().item<double>() == 6.0);
  CHECK(ckpt::find_tensor(data, TensorGroup::kEma, "b") == nullptr);
  CHECK(ckpt::find_tensor(data, TensorGroup::kModel, "e") == nullptr);  // a prefix of "emb"
  const auto find = ckpt::group_finder(data, TensorGroup::kModel);
  REQUIRE(find("emb") != nullptr);
  CHECK(find("emb")->item<double>() == 7.0);
  data.source = "run/checkpoint-7.safetensors";
  CHECK_THROWS_WITH(ckpt::tensor_at(data, TensorGroup::kScaler, ckpt::scaler_field::kScale),
                    Contains("run/checkpoint-7.safetensors") && Contains("scaler.scale"));
}

TEST_CASE("bytes round-trip through uint8 tensors, files included", "[checkpoint][layout]") {
  const std::string bytes("a\0b\xff", 4);
  const at::Tensor t = ckpt::bytes_tensor(bytes);
  CHECK(t.scalar_type() == at::kByte);
  CHECK(t.numel() == 4);
  CHECK(ckpt::tensor_bytes(t) == bytes);
  CHECK(ckpt::tensor_bytes(ckpt::bytes_tensor("")).empty());
  nmt::test::TempDir dir;
  const auto file = dir.write("spm.model", bytes);
  CHECK(ckpt::tensor_bytes(ckpt::file_bytes_tensor(file)) == bytes);
  CHECK_THROWS_AS(ckpt::file_bytes_tensor(dir.path() / "missing.model"), nmt::CheckpointError);
}

TEST_CASE("nmt-ckpt layout's JSON lists every group and the names within groups",
          "[checkpoint][layout]") {
  const auto v = nlohmann::ordered_json::parse(ckpt::tensor_layout_json());
  const auto& groups = v.at("groups");
  REQUIRE(groups.size() == ckpt::kTensorGroups.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    CHECK(groups[i].begin().key() == "name");
    CHECK(groups[i]["name"].get<std::string>() == ckpt::kTensorGroups[i].name);
    CHECK(groups[i]["prefix"].get<std::string>() == ckpt::kTensorGroups[i].prefix);
  }
  CHECK(v.at("optimizer_slots").size() == 3);
  CHECK(v.at("scaler_fields").size() == 5);
  CHECK(v.at("vocabulary_files").at(0).get<std::string>() == ckpt::vocabulary_file::kSource);
  // The documented rng pattern is what rng_stream::name makes.
  std::string pattern = v.at("rng_name").get<std::string>();
  pattern.replace(pattern.find("<kind>"), 6, "cpu");
  pattern.replace(pattern.find("<rank>"), 6, "12");
  CHECK(pattern == ckpt::rng_stream::name("cpu", 12));
}
