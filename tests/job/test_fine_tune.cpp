// job/fine_tune: train.init_from's vocabulary is read without its weights (the launcher and
// every rank read it before data preparation), and the weights, the checksum checked, only
// when the model is built.
#include "catch_torch.h"  // first: see the header

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/checkpoint_fixture.h"
#include "checkpoint/run_metadata.h"
#include "checkpoint/tensor_groups.h"
#include "config/run_config.h"
#include "job/fine_tune.h"
#include "test_support.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::checkpoint::TensorGroup;

namespace {

const std::string kSpmBytes = "stand-in for a SentencePiece model's bytes";

std::vector<std::string> names_of(const nmt::checkpoint::CheckpointData& data) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : data.tensors) names.push_back(name);
  return names;
}

/// A fine-tuning run (train.init_from set) and the checkpoint it starts from: a model weight,
/// optimizer state and the joint vocabulary, with the run's own config as its metadata.
struct FineTuning {
  nmt::test::TempDir dir;
  nmt::config::RunConfig config;
  std::filesystem::path source;

  FineTuning() {
    const auto src = dir.write("train.en", "a b c\nd e f\n");
    const auto tgt = dir.write("train.de", "a b c\nd e f\n");
    nmt::config::ConfigSources sources;
    sources.file = dir.write("run.yaml", "run_dir: " + (dir.path() / "run").string() +
                                             "\ndata:\n  train_src: " + src.string() +
                                             "\n  train_tgt: " + tgt.string() + "\n");
    config = nmt::config::load_run_config(sources);
    save(/*step=*/100);
    config.train.init_from = source.string();
  }

  void save(int64_t step) {
    nmt::checkpoint::RunMetadata meta;
    meta.step = step;
    meta.epoch = 1;
    meta.config = nmt::config::to_yaml(config, /*with_docs=*/false);
    meta.config_hash = nmt::config::config_hash(config);
    nmt::checkpoint::CheckpointData data;
    nmt::checkpoint::add_tensor(data, TensorGroup::kModel, "weight", at::full({64, 64}, 0.5));
    nmt::checkpoint::add_tensor(data, TensorGroup::kOptimizer, "exp_avg.weight",
                                at::full({64, 64}, 0.25));
    nmt::checkpoint::add_tensor(data, TensorGroup::kVocabulary,
                                nmt::checkpoint::vocabulary_file::kSource,
                                nmt::checkpoint::bytes_tensor(kSpmBytes));
    data.metadata = meta.to_map();
    source = dir.path() / "source.safetensors";
    nmt::checkpoint::save_checkpoint(source, data);
  }

  /// Flips a byte in the data section's first tensor: a float32 one (the widest come first),
  /// never the vocabulary's bytes.
  void damage_weights() const {
    std::ifstream in(source, std::ios::binary);
    uint64_t header_bytes = 0;
    in.read(reinterpret_cast<char*>(&header_bytes), sizeof(header_bytes));
    nmt::test::flip_byte(source, static_cast<std::streamoff>(8 + header_bytes + 100));
  }
};

}  // namespace

TEST_CASE("fine-tuning reads its source's vocabulary without the weights", "[job]") {
  FineTuning run;
  const auto read = nmt::job::load_init_checkpoint(run.config);
  REQUIRE(read.has_value());
  // What the launcher and every rank hold through data preparation: no weights.
  CHECK(names_of(read->data) == std::vector<std::string>{"vocab.src_model"});
  CHECK(read->data.metadata.at("step") == "100");
  // The weights are not read at all: damaged, the vocabulary still installs.
  run.damage_weights();
  nmt::job::prepare_init_vocabulary(run.config);
  CHECK(nmt::test::read_file(run.dir.path() / "run" / "vocab" / "joint.model") == kSpmBytes);
}

TEST_CASE("fine-tuning's weights are the source's model group with its checksum checked", "[job]") {
  FineTuning run;
  const auto read = nmt::job::load_init_checkpoint(run.config);
  REQUIRE(read.has_value());
  const nmt::checkpoint::CheckpointData weights = nmt::job::load_init_weights(*read);
  CHECK(names_of(weights) == std::vector<std::string>{"model.weight"});
  CHECK(at::equal(weights.tensors.at(0).second, at::full({64, 64}, 0.5)));
  CHECK(weights.metadata == read->data.metadata);
  run.damage_weights();
  CHECK_THROWS_AS(nmt::job::load_init_weights(*read), nmt::CheckpointError);
  CHECK_THROWS_WITH(nmt::job::load_init_weights(*read), Contains("checksum mismatch"));
  // Replaced since its vocabulary was read (another step saved there): refused.
  run.save(/*step=*/200);
  CHECK_THROWS_WITH(nmt::job::load_init_weights(*read), Contains("changed since"));
}
