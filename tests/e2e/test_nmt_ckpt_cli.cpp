// End-to-end: the real nmt-ckpt binary on small checkpoints written here.
#include "catch_torch.h"

#include <algorithm>

#include <ATen/ATen.h>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/checkpoint_tools.h"
#include "checkpoint/xxhash64.h"
#include "e2e_fixture.h"
#include "test_support.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nmt::checkpoint::CheckpointData;
using nmt::test::check_one_error_line;
using nmt::test::run_command;
using nmt::test::TempDir;

namespace {

const std::string kBin = NMT_CKPT_BIN;

nmt::test::CommandResult ckpt(const std::string& args) { return run_command(kBin + " " + args); }

/// A small training state: two model tensors (f32, bf16), an integer buffer, optimizer state.
CheckpointData state(float shift, std::map<std::string, std::string> metadata = {}) {
  CheckpointData data;
  data.tensors.emplace_back("model.encoder.weight",
                            at::arange(6, at::kFloat).reshape({2, 3}).add(shift));
  data.tensors.emplace_back("model.decoder.bias", at::full({4}, 1.0f + shift).to(at::kBFloat16));
  data.tensors.emplace_back("model.position_ids", at::arange(5, at::kLong));
  data.tensors.emplace_back("optimizer.exp_avg", at::full({2, 3}, shift));
  data.metadata = std::move(metadata);
  return data;
}

std::filesystem::path save(const TempDir& dir, const std::string& name,
                           const CheckpointData& data) {
  const auto file = dir.path() / name;
  nmt::checkpoint::save_checkpoint(file, data);
  return file;
}

}  // namespace

TEST_CASE("nmt-ckpt --help documents every command and flag", "[e2e]") {
  const auto r = ckpt("--help");
  CHECK(r.exit_code == 0);
  for (const char* word :
       {"info PATH", "diff A B", "average OUT IN...", "nmt-ckpt layout", "export-hf IN OUT",
        "--atol", "--all", "parameter_hash", "averaged_from", "--version"}) {
    CHECK_THAT(r.out, Contains(word));
  }
  CHECK_THAT(r.out, Contains("exit code 1 (2 for a wrong command line)"));
  CHECK(ckpt("").exit_code == 2);  // a command is required
  CHECK(ckpt("diff onlyone").exit_code == 2);
  CHECK(ckpt("diff a b --atol -1").exit_code == 2);
  CHECK_THAT(ckpt("diff --help").out, Contains("--atol"));
  CHECK_THAT(ckpt("export-hf --help").out, Contains("--weights") && Contains("--force"));
  CHECK_THAT(ckpt("average --help").out, Contains("--force"));
  CHECK_THAT(ckpt("import-hf --help").out, Contains("--force"));
  CHECK(ckpt("export-hf onlyone").exit_code == 2);
}

TEST_CASE("nmt-ckpt layout prints the tensor names as JSON", "[e2e]") {
  const auto r = ckpt("layout");
  CHECK(r.exit_code == 0);
  for (const char* word : {"\"prefix\": \"model.\"", "\"prefix\": \"optim.\"", "\"exp_avg_sq\"",
                           "\"consecutive_skips\"", "\"tgt_model\"", "\"rng_name\""}) {
    CHECK_THAT(r.out, Contains(word));
  }
  CHECK(ckpt("layout extra").exit_code == 2);
}

TEST_CASE("nmt-ckpt info summarizes a checkpoint as JSON", "[e2e]") {
  TempDir dir;
  const CheckpointData data = state(
      0.5f, {{"step", "1200"}, {"epoch", "3"}, {"config_hash", "abc123"}, {"valid_loss", "2.5"}});
  const auto file = save(dir, "a.safetensors", data);
  const auto r = ckpt("info " + file.string());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, StartsWith("{\n"));
  CHECK_THAT(r.out, Contains("\"path\": \"" + file.string() + "\""));
  CHECK_THAT(r.out, Contains("\"step\": 1200,"));
  CHECK_THAT(r.out, Contains("\"epoch\": 3,"));
  CHECK_THAT(r.out, Contains("\"config_hash\": \"abc123\","));
  CHECK_THAT(r.out, Contains("\"parameters\": 15,"));  // 6 + 4 + 5: model.* only
  const std::string hash = nmt::checkpoint::hex64(nmt::checkpoint::model_parameter_hash(data));
  CHECK_THAT(r.out, Contains("\"parameter_hash\": \"" + hash + "\","));
  CHECK_THAT(r.out, Contains("\"tensors\": 4,"));
  CHECK_THAT(r.out,
             Contains("\"bytes\": " + std::to_string(std::filesystem::file_size(file)) + ","));
  CHECK_THAT(r.out, Contains("\"valid_loss\": \"2.5\""));

  // Without metadata: nulls. The parameter hash ignores non-model tensors and sees model ones.
  CheckpointData other_optimizer = state(0.5f);
  other_optimizer.tensors[3].second.fill_(9);
  const auto bare = ckpt("info " + save(dir, "b.safetensors", other_optimizer).string());
  CHECK_THAT(bare.out, Contains("\"step\": null,"));
  CHECK_THAT(bare.out, Contains("\"config_hash\": null,"));
  CHECK_THAT(bare.out, Contains("\"parameter_hash\": \"" + hash + "\","));
  CHECK_THAT(ckpt("info " + save(dir, "c.safetensors", state(0.25f)).string()).out,
             !Contains(hash));
}

TEST_CASE("nmt-ckpt diff reports per-tensor differences and sets the exit code", "[e2e]") {
  TempDir dir;
  const auto a = save(dir, "a.safetensors", state(0));
  const auto a_again = save(dir, "a2.safetensors", state(0, {{"step", "5"}}));
  const auto b = save(dir, "b.safetensors", state(0.25f));

  const auto same = ckpt("diff " + a.string() + " " + a_again.string());
  CHECK(same.exit_code == 0);
  CHECK_THAT(same.out, Contains("\"max_abs_diff\": 0,"));
  CHECK_THAT(same.out, Contains("\"same\": true"));

  const auto differ = ckpt("diff " + a.string() + " " + b.string());
  CHECK(differ.exit_code == 1);
  CHECK_THAT(differ.out, Contains("\"model.encoder.weight\": 0.25"));
  CHECK_THAT(differ.out, Contains("\"model.decoder.bias\": 0.25"));
  CHECK_THAT(differ.out, Contains("\"model.position_ids\": 0"));
  CHECK_THAT(differ.out, Contains("\"max_abs_diff\": 0.25,"));
  CHECK_THAT(differ.out, Contains("\"same\": false"));
  CHECK_THAT(differ.out, !Contains("optimizer"));
  CHECK(ckpt("diff " + a.string() + " " + b.string() + " --atol 0.25").exit_code == 0);
  CHECK(ckpt("diff " + a.string() + " " + b.string() + " --atol 0.2").exit_code == 1);

  const auto all = ckpt("diff --all " + a.string() + " " + b.string() + " --atol 0.25");
  CHECK_THAT(all.out, Contains("\"optimizer.exp_avg\": 0.25"));
  CHECK_THAT(all.out, Contains("\"compared\": \"all\""));
  CHECK(all.exit_code == 0);

  CheckpointData reshaped = state(0);
  reshaped.tensors[0].second = reshaped.tensors[0].second.reshape({3, 2});
  reshaped.tensors.emplace_back("model.extra", at::zeros({1}));
  const auto c = save(dir, "c.safetensors", reshaped);
  const auto mismatch = ckpt("diff " + a.string() + " " + c.string() + " --atol 100");
  CHECK(mismatch.exit_code == 1);
  CHECK_THAT(mismatch.out, Contains("\"model.encoder.weight: shape [2, 3] in a, [3, 2] in b\""));
  CHECK_THAT(mismatch.out, Contains("\"model.extra: only in b\""));
}

TEST_CASE("nmt-ckpt average writes the mean of the model tensors", "[e2e]") {
  TempDir dir;
  const auto a = save(dir, "a.safetensors", state(0, {{"step", "100"}}));
  const auto b = save(dir, "b.safetensors", state(1, {{"step", "200"}}));
  const auto c = save(dir, "c.safetensors", state(5, {{"step", "300"}, {"epoch", "2"}}));
  const auto out = dir.path() / "avg.safetensors";
  const auto r =
      ckpt("average " + out.string() + " " + a.string() + " " + b.string() + " " + c.string());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const CheckpointData avg = nmt::checkpoint::load_checkpoint(out);
  REQUIRE(avg.tensors.size() == 3);  // the optimizer state is dropped
  CHECK(avg.at("model.encoder.weight").allclose(at::arange(6, at::kFloat).reshape({2, 3}).add(2)));
  CHECK(avg.at("model.decoder.bias").scalar_type() == at::kBFloat16);
  CHECK(avg.at("model.decoder.bias").to(at::kFloat).equal(at::full({4}, 3.0f)));
  CHECK(avg.at("model.position_ids").equal(at::arange(5, at::kLong)));
  CHECK(avg.meta("step") == "300");
  CHECK(avg.meta("epoch") == "2");
  CHECK(avg.meta("averaged_from") == a.string() + "," + b.string() + "," + c.string());

  // The mean is taken in float64: 1/3 in f32 is the rounding of the exact mean.
  CheckpointData thirds = state(0);
  thirds.tensors[0].second = at::full({2, 3}, 1.0f);
  CheckpointData zeros = state(0);
  zeros.tensors[0].second = at::zeros({2, 3});
  const auto one = save(dir, "one.safetensors", thirds);
  const auto zero = save(dir, "zero.safetensors", zeros);
  REQUIRE(ckpt("average --force " + out.string() + " " + one.string() + " " + zero.string() + " " +
               zero.string())
              .exit_code == 0);
  CHECK(nmt::checkpoint::load_checkpoint(out).at("model.encoder.weight")[0][0].item<float>() ==
        static_cast<float>(1.0 / 3.0));
}

TEST_CASE("nmt-ckpt average and import-hf keep an existing OUT unless --force", "[e2e]") {
  TempDir dir;
  const auto a = save(dir, "a.safetensors", state(0, {{"step", "100"}}));
  const auto b = save(dir, "b.safetensors", state(1, {{"step", "200"}}));
  const auto out = dir.path() / "kept.safetensors";
  dir.write("kept.safetensors", "mine");
  const auto average = ckpt("average " + out.string() + " " + a.string() + " " + b.string());
  CHECK(average.exit_code == 1);
  CHECK_THAT(average.err, Contains(out.string() + " exists") && Contains("--force"));
  // import-hf says so before it reads the model directory (here: none).
  const auto import =
      ckpt("import-hf " + (dir.path() / "no-model").string() + " -o " + out.string());
  CHECK(import.exit_code == 1);
  CHECK_THAT(import.err, Contains(out.string() + " exists") && Contains("--force"));
  CHECK(nmt::test::read_file(out) == "mine");

  REQUIRE(ckpt("average --force " + out.string() + " " + a.string() + " " + b.string()).exit_code ==
          0);
  CHECK(nmt::checkpoint::load_checkpoint(out).meta("averaged_from") ==
        a.string() + "," + b.string());
}

TEST_CASE("nmt-ckpt import-hf never writes into HF_DIR, even with --force", "[e2e]") {
  // -o HF_DIR/model.safetensors --force replaced the model it was importing (#44).
  TempDir dir;
  const auto weights = dir.write("hf/model.safetensors", "the model's weights");
  dir.write("hf/config.json", "{}");
  std::filesystem::create_directory_symlink(dir.path() / "hf", dir.path() / "link");
  for (const std::filesystem::path& out :
       {weights, dir.path() / "hf/nmt.safetensors", dir.path() / "hf/sub/nmt.safetensors",
        dir.path() / "hf", dir.path() / "link/model.safetensors"}) {
    INFO(out.string());
    const auto r =
        ckpt("import-hf " + (dir.path() / "hf").string() + " -o " + out.string() + " --force");
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains(out.string() + ": the output") && Contains("HF_DIR") &&
                          Contains("which the command reads"));
  }
  CHECK(nmt::test::read_file(weights) == "the model's weights");
  CHECK_FALSE(std::filesystem::exists(dir.path() / "hf/sub"));
}

TEST_CASE("nmt-ckpt import-hf --force replaces only a checkpoint that import-hf wrote", "[e2e]") {
  // --force replaced any file: a run's checkpoint, or one that is not a checkpoint at all.
  TempDir dir;
  const auto hf = (dir.path() / "no-model").string();
  const auto run_checkpoint =
      save(dir, "checkpoint-00000100.safetensors", state(0, {{"step", "100"}}));
  const auto other = dir.write("notes.txt", "mine");
  for (const std::filesystem::path& out : {run_checkpoint, other}) {
    INFO(out.string());
    const auto before = nmt::test::read_file(out);
    const auto r = ckpt("import-hf " + hf + " -o " + out.string() + " --force");
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains(out.string() + " exists and is not a checkpoint that import-hf "
                                              "wrote") &&
                          Contains("imported_from"));
    CHECK(nmt::test::read_file(out) == before);
  }
  // An earlier import's file is replaced: the command goes on to read HF_DIR (here: none).
  const auto imported =
      save(dir, "imported.safetensors", state(0, {{"imported_from", "models/opus-mt-en-de"}}));
  const auto r = ckpt("import-hf " + hf + " -o " + imported.string() + " --force");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("no-model") && !Contains("exists"));
}

TEST_CASE("nmt-ckpt errors are one line naming the file and what is wrong", "[e2e]") {
  TempDir dir;
  const auto a = save(dir, "a.safetensors", state(0));
  CheckpointData shifted_ids = state(0);
  shifted_ids.tensors[2].second = at::arange(1, 6, at::kLong);
  const auto ids = save(dir, "ids.safetensors", shifted_ids);
  CheckpointData reshaped = state(0);
  reshaped.tensors[1].second = at::zeros({2, 2}, at::kBFloat16);
  const auto shape = save(dir, "shape.safetensors", reshaped);
  const auto out = dir.path() / "out.safetensors";

  check_one_error_line("nmt-ckpt",
                       ckpt("average " + out.string() + " " + a.string() + " " + ids.string()),
                       ids.string() + ": integer tensor \"model.position_ids\" differs");
  check_one_error_line(
      "nmt-ckpt", ckpt("average " + out.string() + " " + a.string() + " " + shape.string()),
      shape.string() + ": tensor \"model.decoder.bias\" has shape [2, 2], but [4] in " +
          a.string());
  CHECK_FALSE(std::filesystem::exists(out));

  const auto corrupt = save(dir, "corrupt.safetensors", state(0));
  std::filesystem::resize_file(corrupt, std::filesystem::file_size(corrupt) - 1);
  check_one_error_line("nmt-ckpt", ckpt("info " + corrupt.string()),
                       corrupt.string() + ": truncated: ");
  check_one_error_line("nmt-ckpt",
                       ckpt("diff " + a.string() + " " + (dir.path() / "none").string()),
                       (dir.path() / "none").string() + ": cannot open: No such file or directory");
}
