// The typed metadata of training checkpoints: named keys, round trip, checked parsing, and
// resuming past a checkpoint whose metadata is damaged.
#include "catch_torch.h"

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/run_metadata.h"
#include "checkpoint_fixture.h"
#include "test_support.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::checkpoint::RunMetadata;

namespace {

RunMetadata full_metadata() {
  RunMetadata m;
  m.step = 120;
  m.epoch = 3;
  m.iterator_epoch = 3;
  m.iterator_step = 7;
  m.world_size = 2;
  m.config = "model:\n  d_model: 64\n";
  m.config_hash = "0123456789abcdef";
  m.vocab_fingerprint = "fedcba9876543210";
  m.vocab_joint = false;
  m.elapsed_s = 12.5;
  m.valid_loss = 2.25;
  m.valid_bleu = 17.5;
  m.selection = -17.5;
  m.best_selection = -18.0;
  m.validations_without_improvement = 2;
  return m;
}

}  // namespace

TEST_CASE("run metadata round-trips through the checkpoint's string map", "[checkpoint]") {
  const RunMetadata m = full_metadata();
  const auto map = m.to_map();
  CHECK(map.at("step") == "120");
  CHECK(map.at("iterator_step") == "7");
  CHECK(map.at("vocab_joint") == "false");
  CHECK(map.at("selection") == "-17.5");
  CHECK(map.count("valid_chrf") == 0);  // absent optionals are not written
  const RunMetadata back = RunMetadata::parse_resumable(map, "ckpt");
  CHECK(back.to_map() == map);
  CHECK(back.valid_bleu == 17.5);
  CHECK_FALSE(back.valid_chrf.has_value());
  CHECK(back.best_selection == -18.0);
  CHECK(back.validations_without_improvement == 2);
}

TEST_CASE("malformed or missing metadata is a CheckpointError naming the file and key",
          "[checkpoint]") {
  auto map = full_metadata().to_map();
  map["iterator_step"] = "7x";
  CHECK_THROWS_AS(RunMetadata::parse(map, "a.safetensors"), nmt::CheckpointError);
  CHECK_THROWS_WITH(RunMetadata::parse(map, "a.safetensors"),
                    "a.safetensors: metadata iterator_step: expected an integer, found '7x'");
  map = full_metadata().to_map();
  map["elapsed_s"] = "soon";
  CHECK_THROWS_WITH(RunMetadata::parse(map, "a.safetensors"),
                    "a.safetensors: metadata elapsed_s: expected a number, found 'soon'");
  map = full_metadata().to_map();
  map["vocab_joint"] = "yes";
  CHECK_THROWS_WITH(RunMetadata::parse(map, "a.safetensors"),
                    Contains("vocab_joint: expected true or false, found 'yes'"));
  map = full_metadata().to_map();
  map["step"] = "-3";
  CHECK_THROWS_WITH(RunMetadata::parse(map, "a.safetensors"), Contains("out of range: step -3"));
  map = full_metadata().to_map();
  map.erase("world_size");
  CHECK_NOTHROW(RunMetadata::parse(map, "a.safetensors"));  // a model-only checkpoint is fine
  CHECK_THROWS_WITH(RunMetadata::parse_resumable(map, "a.safetensors"),
                    Contains("a.safetensors: no metadata key \"world_size\""));
}

TEST_CASE("selection_of reads only finite numbers", "[checkpoint]") {
  using nmt::checkpoint::selection_of;
  CHECK(selection_of({{"selection", "-17.5"}}) == -17.5);
  CHECK_FALSE(selection_of({{"selection", "nan"}}).has_value());
  CHECK_FALSE(selection_of({{"selection", "1.5x"}}).has_value());
  CHECK_FALSE(selection_of({}).has_value());
}

TEST_CASE("resume auto passes over a newest checkpoint whose metadata is malformed",
          "[checkpoint]") {
  nmt::test::TempDir tmp;
  nmt::checkpoint::CheckpointDir dir(tmp.path() / "checkpoints", {});
  auto good = full_metadata().to_map();
  good["step"] = "4";
  dir.save(4, nmt::test::small_checkpoint(1.0f, good));
  auto bad = full_metadata().to_map();
  bad["step"] = "8";
  bad["iterator_epoch"] = "2.5";  // not an integer: damaged
  dir.save(8, nmt::test::small_checkpoint(2.0f, bad));
  const auto filter = [](const nmt::checkpoint::CheckpointData& data) {
    RunMetadata::parse_resumable(data.metadata, data.source.string());
    return std::optional<std::string>();
  };
  const auto found = dir.load_newest_valid(filter);
  REQUIRE(found.has_value());
  CHECK(found->first == dir.path_for_step(4));
}

TEST_CASE("the language list and lang_tags are written only for a multilingual run", "[checkpoint]") {
  RunMetadata m = full_metadata();
  CHECK(m.to_map().count("languages") == 0);
  CHECK(m.to_map().count("lang_tags") == 0);
  m.languages = {"de", "en"};
  m.target_lang_tags = true;
  const auto map = m.to_map();
  CHECK(map.at("languages") == "de,en");
  CHECK(map.at("lang_tags") == "target");
  const RunMetadata back = RunMetadata::parse(map, "ckpt");
  CHECK(back.languages == std::vector<std::string>{"de", "en"});
  CHECK(back.target_lang_tags);
  auto bad = map;
  bad["languages"] = "de,,en";
  CHECK_THROWS_WITH(RunMetadata::parse(bad, "a.safetensors"),
                    "a.safetensors: metadata languages: expected comma-separated language codes, found 'de,,en'");
  bad = map;
  bad["lang_tags"] = "source";
  CHECK_THROWS_WITH(RunMetadata::parse(bad, "a.safetensors"),
                    "a.safetensors: metadata lang_tags: expected target, found 'source'");
}
