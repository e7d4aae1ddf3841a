// checkpoint/checkpoint_file: partial reads. read_checkpoint_tensors reads the header and the
// tensors asked for, no other byte; read_checkpoint_tensor_names the header alone;
// load_checkpoint(file, keep) reads and hashes every byte but holds only the tensors kept.
#include "catch_torch.h"  // first: see the header

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/ATen.h>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint_fixture.h"
#include "test_support.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::checkpoint::CheckpointData;

namespace {

/// Saves small_checkpoint(1) (model.weight, optimizer.exp_avg) and a small uint8 tensor.
std::filesystem::path save_three(const nmt::test::TempDir& dir) {
  CheckpointData data = nmt::test::small_checkpoint(1.0f, {{"step", "7"}});
  data.tensors.emplace_back("vocab.src_model", at::arange(5, at::kByte));
  const auto file = dir.path() / "three.safetensors";
  nmt::checkpoint::save_checkpoint(file, data);
  return file;
}

bool is_vocab(std::string_view name) { return name == "vocab.src_model"; }

/// Flips a byte of the data section's first tensor (a float32 one: the widest come first).
void damage_first_tensor(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  uint64_t header_bytes = 0;
  in.read(reinterpret_cast<char*>(&header_bytes), sizeof(header_bytes));
  nmt::test::flip_byte(file, static_cast<std::streamoff>(8 + header_bytes + 2));
}

}  // namespace

TEST_CASE("a partial read holds the named tensors and the metadata alone", "[checkpoint]") {
  nmt::test::TempDir dir;
  const auto file = save_three(dir);
  const CheckpointData read = nmt::checkpoint::read_checkpoint_tensors(file, is_vocab);
  REQUIRE(read.tensors.size() == 1);
  CHECK(read.tensors[0].first == "vocab.src_model");
  CHECK(at::equal(read.tensors[0].second, at::arange(5, at::kByte)));
  CHECK(read.metadata.at("step") == "7");
  CHECK(read.source == file);
  // The other tensors' bytes are never read: damaged, the read is the same.
  damage_first_tensor(file);
  CHECK(at::equal(nmt::checkpoint::read_checkpoint_tensors(file, is_vocab).tensors.at(0).second,
                  at::arange(5, at::kByte)));
  // A bad header still is refused.
  nmt::test::truncate_file(file, 4);
  CHECK_THROWS_AS(nmt::checkpoint::read_checkpoint_tensors(file, is_vocab), nmt::CheckpointError);
}

TEST_CASE("the tensor names of a header come back in its order, and no byte of data is read",
          "[checkpoint]") {
  nmt::test::TempDir dir;
  const auto file = save_three(dir);
  const std::vector<std::string> names{"model.weight", "optimizer.exp_avg", "vocab.src_model"};
  CHECK(nmt::checkpoint::read_checkpoint_tensor_names(file) == names);
  damage_first_tensor(file);
  CHECK(nmt::checkpoint::read_checkpoint_tensor_names(file) == names);
  nmt::test::truncate_file(file, 4);
  CHECK_THROWS_AS(nmt::checkpoint::read_checkpoint_tensor_names(file), nmt::CheckpointError);
}

TEST_CASE("a load that keeps some tensors still checks every byte", "[checkpoint]") {
  nmt::test::TempDir dir;
  const auto file = save_three(dir);
  const auto model_only = [](std::string_view name) { return name == "model.weight"; };
  const CheckpointData kept = nmt::checkpoint::load_checkpoint(file, model_only);
  REQUIRE(kept.tensors.size() == 1);
  CHECK(kept.tensors[0].first == "model.weight");
  CHECK(at::equal(kept.tensors[0].second, at::full({2, 3}, 1.0f)));
  CHECK(nmt::checkpoint::load_checkpoint(file, nullptr).tensors.size() == 3);
  // A damaged byte in a tensor not kept is still found.
  damage_first_tensor(file);
  CHECK_THROWS_WITH(nmt::checkpoint::load_checkpoint(file, is_vocab),
                    Contains("checksum mismatch"));
}

namespace {

/// The process's anonymous resident memory (RssAnon of /proc/self/status), in bytes.
int64_t anonymous_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("RssAnon:", 0) == 0) return std::stoll(line.substr(8)) * 1024;
  return -1;
}

/// The weights' bytes of save_big's checkpoint.
constexpr int64_t kBigBytes = int64_t{64} << 20;

/// A checkpoint of kBigBytes of float32 weights, written to dir/big.safetensors.
std::filesystem::path save_big(const nmt::test::TempDir& dir) {
  CheckpointData data;
  data.tensors.emplace_back("model.weight", at::rand({16, 1 << 20}));
  data.metadata["step"] = "1";
  const auto file = dir.path() / "big.safetensors";
  nmt::checkpoint::save_checkpoint(file, data);
  return file;
}

/// Checks that `mapped` holds the tensors of `read` (names, order, values) and its metadata.
void check_same_tensors(const CheckpointData& mapped, const CheckpointData& read) {
  REQUIRE(mapped.tensors.size() == read.tensors.size());
  for (size_t i = 0; i < read.tensors.size(); ++i) {
    CHECK(mapped.tensors[i].first == read.tensors[i].first);
    CHECK(at::equal(mapped.tensors[i].second, read.tensors[i].second));
  }
  CHECK(mapped.metadata == read.metadata);
}

}  // namespace

TEST_CASE("map_checkpoint: the tensors of load_checkpoint as views of the file, copied on write",
          "[checkpoint]") {
  nmt::test::TempDir dir;
  const auto file = save_three(dir);
  const CheckpointData copied = nmt::checkpoint::load_checkpoint(file);
  {
    const CheckpointData mapped = nmt::checkpoint::map_checkpoint(file);
    check_same_tensors(mapped, copied);
    // A write to a view changes this process's page, not the file.
    mapped.tensors[0].second.add_(1);
  }
  const CheckpointData again = nmt::checkpoint::map_checkpoint(file, is_vocab);
  REQUIRE(again.tensors.size() == 1);
  CHECK(at::equal(nmt::checkpoint::load_checkpoint(file).tensors[0].second,
                  copied.tensors[0].second));
  // Every byte is still hashed: a damaged tensor that is not kept is refused as by load.
  damage_first_tensor(file);
  CHECK_THROWS_WITH(nmt::checkpoint::map_checkpoint(file, is_vocab), Contains("checksum"));
}

TEST_CASE("map_checkpoint holds no copy of the tensors in the process's own memory",
          "[checkpoint]") {
  // 64 MiB of weights: loaded, they are that much more anonymous memory; mapped, they are the
  // page cache's (what the ranks of a node share), and this process's memory barely moves.
  nmt::test::TempDir dir;
  const auto file = save_big(dir);
  const int64_t before_load = anonymous_bytes();
  REQUIRE(before_load > 0);
  {
    const CheckpointData loaded = nmt::checkpoint::load_checkpoint(file);
    CHECK(anonymous_bytes() - before_load > kBigBytes * 3 / 4);
  }
  const int64_t before_map = anonymous_bytes();
  const CheckpointData mapped = nmt::checkpoint::map_checkpoint(file);
  CHECK(at::sum(mapped.tensors.at(0).second).item<double>() > 0);  // every page read
  CHECK(anonymous_bytes() - before_map < kBigBytes / 8);
}

TEST_CASE("map_safetensors: load_safetensors's tensors as views of the file, no copy held",
          "[checkpoint]") {
  nmt::test::TempDir dir;
  const auto file = save_three(dir);
  const CheckpointData loaded = nmt::checkpoint::load_safetensors(file);
  {
    const CheckpointData mapped = nmt::checkpoint::map_safetensors(file);
    check_same_tensors(mapped, loaded);  // the metadata's every key, nmt.* too: any safetensors
    mapped.tensors[0].second.add_(1);    // copied on write: the file stays as it was
  }
  CHECK(at::equal(nmt::checkpoint::load_safetensors(file).tensors[0].second,
                  loaded.tensors[0].second));
  // 64 MiB of weights mapped: this process's own memory barely moves.
  const auto big_file = save_big(dir);
  const int64_t before = anonymous_bytes();
  const CheckpointData mapped = nmt::checkpoint::map_safetensors(big_file);
  CHECK(at::sum(mapped.tensors.at(0).second).item<double>() > 0);  // every page read
  CHECK(anonymous_bytes() - before < kBigBytes / 8);
  // A file cut short is refused, not mapped past its end.
  nmt::test::truncate_file(big_file, std::filesystem::file_size(big_file) - 8);
  CHECK_THROWS_AS(nmt::checkpoint::map_safetensors(big_file), nmt::CheckpointError);
}
