// hf/hf_weight_files: a transformers directory's safetensors, one file or shards that
// must agree exactly with model.safetensors.index.json, and files that are not regular files
// refused before they are opened.
#include "catch_torch.h"  // first: see the header

#include <sys/stat.h>

#include <map>
#include <string>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_file.h"
#include "hf/hf_weight_files.h"
#include "test_support.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::checkpoint::NamedTensors;
using nmt::hf::read_hf_weight_files;

namespace {

/// Writes `tensors` as a safetensors file dir/name.
void write_shard(const nmt::test::TempDir& dir, const std::string& name, NamedTensors tensors) {
  nmt::checkpoint::CheckpointData file;
  file.tensors = std::move(tensors);
  nmt::checkpoint::save_checkpoint(dir.path() / name, file);
}

/// A directory of two shards ("a" and "b" in one, "c" in the other) and an index saying so,
/// with `edit` applied to the weight map first.
struct ShardedDir {
  nmt::test::TempDir dir;
  at::Tensor a = at::full({2}, 1.0), b = at::full({3}, 2.0), c = at::full({1}, 3.0);
  nlohmann::json map = {
      {"a", "one.safetensors"}, {"b", "one.safetensors"}, {"c", "two.safetensors"}};
  ShardedDir() {
    write_shard(dir, "one.safetensors", {{"a", a}, {"b", b}});
    write_shard(dir, "two.safetensors", {{"c", c}});
  }
  void write_index() const {
    dir.write("model.safetensors.index.json",
              nlohmann::json{{"metadata", {{"total_size", 24}}}, {"weight_map", map}}.dump());
  }
};

std::map<std::string, at::Tensor> by_name(const NamedTensors& tensors) {
  return {tensors.begin(), tensors.end()};
}

}  // namespace

TEST_CASE("sharded weights are read from the shard the index names for each tensor", "[hf]") {
  ShardedDir sharded;
  sharded.write_index();
  const auto tensors = by_name(read_hf_weight_files(sharded.dir.path()));
  REQUIRE(tensors.size() == 3);
  CHECK(at::equal(tensors.at("a"), sharded.a));
  CHECK(at::equal(tensors.at("b"), sharded.b));
  CHECK(at::equal(tensors.at("c"), sharded.c));
}

TEST_CASE("shards that disagree with their index are refused, naming the tensor", "[hf]") {
  const std::string index = "model.safetensors.index.json";
  SECTION("a tensor in two shards") {
    // Read before: both copies, the first one kept silently.
    ShardedDir sharded;
    write_shard(sharded.dir, "two.safetensors", {{"c", sharded.c}, {"a", sharded.b}});
    sharded.write_index();
    CHECK_THROWS_WITH(read_hf_weight_files(sharded.dir.path()),
                      Contains(index) && Contains("tensor a is in two shards") &&
                          Contains("one.safetensors and two.safetensors"));
  }
  SECTION("a tensor in another shard than the index names") {
    ShardedDir sharded;
    sharded.map["b"] = "two.safetensors";
    sharded.write_index();
    CHECK_THROWS_WITH(read_hf_weight_files(sharded.dir.path()),
                      Contains("shard one.safetensors holds b, which key \"weight_map\" puts in "
                               "two.safetensors"));
  }
  SECTION("a mapped tensor that its shard does not hold") {
    ShardedDir sharded;
    sharded.map["d"] = "two.safetensors";
    sharded.write_index();
    CHECK_THROWS_WITH(read_hf_weight_files(sharded.dir.path()),
                      Contains("key \"weight_map\" puts d in two.safetensors, which does not "
                               "hold it"));
  }
  SECTION("a shard's tensor that the index does not name") {
    ShardedDir sharded;
    sharded.map.erase("b");
    sharded.write_index();
    CHECK_THROWS_WITH(read_hf_weight_files(sharded.dir.path()),
                      Contains("shard one.safetensors holds b, which key \"weight_map\" does not "
                               "name"));
  }
  SECTION("a shard outside the directory, and a map of the wrong type") {
    ShardedDir sharded;
    sharded.map["c"] = "../two.safetensors";
    sharded.write_index();
    CHECK_THROWS_WITH(read_hf_weight_files(sharded.dir.path()),
                      Contains("is not a file name in the directory"));
    sharded.dir.write(index, R"({"weight_map": {"a": 1}})");
    CHECK_THROWS_WITH(read_hf_weight_files(sharded.dir.path()),
                      Contains("key \"weight_map.a\" is 1, expected a shard file name"));
  }
}

TEST_CASE("weight files that are not regular files are refused, not waited on", "[hf]") {
  // Opening a FIFO for reading waits for a writer: the import hung.
  nmt::test::TempDir dir;
  REQUIRE(::mkfifo((dir.path() / "model.safetensors").c_str(), 0600) == 0);
  CHECK_THROWS_AS(read_hf_weight_files(dir.path()), nmt::CheckpointError);
  CHECK_THROWS_WITH(read_hf_weight_files(dir.path()),
                    Contains("model.safetensors: not a regular file (a FIFO)"));
  std::filesystem::remove(dir.path() / "model.safetensors");
  REQUIRE(::mkfifo((dir.path() / "model.safetensors.index.json").c_str(), 0600) == 0);
  CHECK_THROWS_WITH(read_hf_weight_files(dir.path()),
                    Contains("model.safetensors.index.json: not a regular file (a FIFO)"));
  ShardedDir sharded;
  sharded.write_index();
  std::filesystem::remove(sharded.dir.path() / "two.safetensors");
  REQUIRE(::mkfifo((sharded.dir.path() / "two.safetensors").c_str(), 0600) == 0);
  CHECK_THROWS_WITH(read_hf_weight_files(sharded.dir.path()),
                    Contains("two.safetensors: not a regular file (a FIFO)"));
}
