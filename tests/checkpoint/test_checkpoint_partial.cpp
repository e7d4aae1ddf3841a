// checkpoint/checkpoint_file: partial reads. read_checkpoint_tensors reads the header and the
// tensors asked for, no other byte; load_checkpoint(file, keep) reads and hashes every byte but
// holds only the tensors kept.
#include "catch_torch.h"  // first: see the header

#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

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
