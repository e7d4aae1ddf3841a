// hf/hf_export: every shipped config trains a model that exports to transformers, and a model
// that does not export is refused before anything is written. What transformers makes of an
// export is tests/scripts/test_hf_export.py.
#include "catch_torch.h"  // first: see the header

#include <algorithm>
#include <filesystem>
#include <string>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_file.h"
#include "hf/hf_config_writer.h"
#include "checkpoint/run_metadata.h"
#include "checkpoint/tensor_groups.h"
#include "config/run_config.h"
#include "data/vocab.h"
#include "hf/hf_export.h"
#include "model/transformer.h"
#include "spm_fixture.h"
#include "test_support.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::test::TempDir;
namespace fs = std::filesystem;

namespace {

/// A run directory as training leaves it (run/checkpoints/checkpoint-00000010.safetensors, a
/// log beside them): a tiny model that exports as MarianMT (post-norm, marian positions), its
/// weights in `dtype`, with its joint vocabulary. Returns the run directory.
fs::path tiny_run(const TempDir& dir, at::ScalarType dtype = at::kFloat) {
  const fs::path run = dir.path() / "run";
  fs::create_directories(run / "checkpoints");
  const fs::path spm = nmt::test::train_user_defined_tag_vocab(
      std::string(NMT_SOURCE_DIR) + "/data/ddtp.en-de.test.en", dir.path() / "joint", {"<2de>"},
      200);
  const nmt::data::Vocab vocab = nmt::data::Vocab::load(spm);
  nmt::config::RunConfig config;
  nmt::model::ModelOptions& m = config.model;
  m.encoder_layers = m.decoder_layers = 1;
  m.d_model = 16;
  m.heads = 2;
  m.ffn_dim = 32;
  m.max_positions = 32;
  m.norm = nmt::model::NormPosition::kPost;
  m.positions = nmt::model::PositionEncoding::kMarian;
  config.data.vocab_size = vocab.size();
  at::manual_seed(1);
  nmt::model::Transformer model(m, vocab.size(), vocab.size(), vocab.pad_id());
  nmt::checkpoint::CheckpointData data;
  for (const auto& item : model->named_parameters())
    nmt::checkpoint::add_tensor(data, nmt::checkpoint::TensorGroup::kModel, item.key(),
                                item.value().detach().to(dtype));
  nmt::checkpoint::add_tensor(data, nmt::checkpoint::TensorGroup::kVocabulary,
                              nmt::checkpoint::vocabulary_file::kSource,
                              nmt::checkpoint::file_bytes_tensor(spm));
  nmt::checkpoint::RunMetadata meta;
  meta.step = 10;
  meta.config = nmt::config::to_yaml(config, /*with_docs=*/false);
  meta.vocab_joint = true;
  data.metadata = meta.to_map();
  nmt::checkpoint::save_checkpoint(run / "checkpoints/checkpoint-00000010.safetensors", data);
  dir.write("run/train.log", "the run's log\n");
  return run;
}

nmt::hf::HfExportOptions forced(const fs::path& in, const fs::path& out) {
  nmt::hf::HfExportOptions options{in.string(), out};
  options.force = true;
  return options;
}

}  // namespace

TEST_CASE("every shipped config trains a model that exports to transformers", "[hf]") {
  for (const char* name :
       {"configs/demo.yaml", "configs/tiny.yaml", "configs/multilingual-tiny.yaml",
        "configs/transformer-base.yaml", "configs/transformer-big.yaml"}) {
    INFO(name);
    const nmt::config::RunConfig config = nmt::config::load_run_config({name});
    const auto vocab = config.data.vocab_size;
    CHECK_NOTHROW(nmt::hf::hf_config_for(config.model, {vocab, vocab, 0, 3, 2}));
  }
}

TEST_CASE("a model with sinusoidal positions is refused, naming the keys, and nothing is written",
          "[hf]") {
  // The legacy fixture: pre-norm with the built-in default positions (sinusoidal).
  const std::string legacy =
      std::string(NMT_SOURCE_DIR) + "/tests/train/data/legacy-d6612cb.safetensors";
  const nmt::test::TempDir dir;
  const std::filesystem::path out = dir.path() / "hf";
  CHECK_THROWS_AS(nmt::hf::export_hf({legacy, out}), nmt::CheckpointError);
  CHECK_THROWS_WITH(nmt::hf::export_hf({legacy, out}),
                    Contains("legacy-d6612cb.safetensors") &&
                        Contains("model.norm: pre with model.positions: sinusoidal") &&
                        Contains("model.positions: m2m100"));
  CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("an existing output directory is kept unless --force", "[hf]") {
  const TempDir dir;
  dir.write("hf/keep.txt", "mine");
  CHECK_THROWS_WITH(nmt::hf::export_hf({"unused", dir.path() / "hf"}),
                    Contains("exists") && Contains("--force"));
  CHECK(nmt::test::read_file(dir.path() / "hf/keep.txt") == "mine");
}

TEST_CASE("an output directory that holds the working directory is refused, even with --force",
          "[hf]") {
  // "." or ".." as OUT: the staged export was made inside it, and --force's replacement
  // deleted the folder the command runs in.
  const std::string legacy =
      std::string(NMT_SOURCE_DIR) + "/tests/train/data/legacy-d6612cb.safetensors";
  for (const char* out : {".", "./", "..", "/"}) {
    INFO(out);
    nmt::hf::HfExportOptions options{legacy, out};
    options.force = true;
    CHECK_THROWS_WITH(nmt::hf::export_hf(options),
                      Contains("holds the working directory") && Contains("a folder of its own"));
  }
}

TEST_CASE("export-hf --force replaces an earlier export or an empty folder, nothing else", "[hf]") {
  // --force deleted whatever OUT held (#44): a folder of someone's files, a run directory.
  const TempDir dir;
  const fs::path run = tiny_run(dir);
  const fs::path out = dir.path() / "hf";
  const nmt::hf::HfExportResult result = nmt::hf::export_hf({run.string(), out});
  CHECK(fs::is_regular_file(out / nmt::hf::kExportMarker));
  CHECK(std::find(result.files.begin(), result.files.end(), nmt::hf::kExportMarker) !=
        result.files.end());
  dir.write("hf/stale.txt", "from the first export's time");
  CHECK_NOTHROW(nmt::hf::export_hf(forced(run, out)));
  CHECK_FALSE(fs::exists(out / "stale.txt"));
  CHECK(fs::is_regular_file(out / "config.json"));

  fs::create_directories(dir.path() / "empty");
  CHECK_NOTHROW(nmt::hf::export_hf(forced(run, dir.path() / "empty")));
  CHECK(fs::is_regular_file(dir.path() / "empty/model.safetensors"));

  dir.write("mine/notes.txt", "mine");
  CHECK_THROWS_WITH(nmt::hf::export_hf(forced(run, dir.path() / "mine")),
                    Contains("not empty") && Contains("was not written by export-hf") &&
                        Contains(nmt::hf::kExportMarker));
  CHECK(nmt::test::read_file(dir.path() / "mine/notes.txt") == "mine");
}

TEST_CASE(
    "export-hf refuses an output that is, holds or lies inside what it reads, even with --force",
    "[hf]") {
  // export-hf run run --force exported, then deleted the run: checkpoints, vocabulary, logs.
  const TempDir dir;
  const fs::path run = tiny_run(dir);
  const fs::path ckpt = run / "checkpoints/checkpoint-00000010.safetensors";
  fs::create_directory_symlink(dir.path(), dir.path() / "link");
  for (const fs::path& out :
       {run, dir.path(), run / "checkpoints", run / "checkpoints/hf", dir.path() / "link/run"}) {
    INFO(out.string());
    CHECK_THROWS_WITH(nmt::hf::export_hf(forced(run, out)),
                      Contains("the output") && Contains("which the command reads"));
    // A checkpoint file given: what holds it (its folder is only listed for a run directory).
    if (out != run / "checkpoints/hf")
      CHECK_THROWS_WITH(nmt::hf::export_hf(forced(ckpt, out)),
                        Contains("holds the checkpoint") && Contains(ckpt.string()));
    CHECK(fs::is_regular_file(ckpt));
    CHECK(nmt::test::read_file(run / "train.log") == "the run's log\n");
  }
  // A folder of its own in the run directory, as docs/serving.md shows, is not the input; nor
  // is the folder of a checkpoint file given (models/x.safetensors -> models/x-hf).
  CHECK_NOTHROW(nmt::hf::export_hf({run.string(), run / "hf"}));
  CHECK_NOTHROW(nmt::hf::export_hf({ckpt.string(), run / "checkpoints/hf"}));
}

TEST_CASE("export-hf: config.json says the dtype of the weights it wrote", "[hf]") {
  // An fp16 or bf16 checkpoint (an import keeps its dtypes) was written as such, but
  // config.json said float32, which transformers loads it as.
  for (const auto& [dtype, name] :
       {std::pair{at::kFloat, "float32"}, std::pair{at::kHalf, "float16"},
        std::pair{at::kBFloat16, "bfloat16"}}) {
    INFO(name);
    const TempDir dir;
    const fs::path run = tiny_run(dir, dtype);
    nmt::hf::export_hf({run.string(), dir.path() / "hf"});
    const auto config = nlohmann::json::parse(nmt::test::read_file(dir.path() / "hf/config.json"));
    CHECK(config.at("dtype") == name);
    const auto weights = nmt::checkpoint::load_safetensors(dir.path() / "hf/model.safetensors");
    for (const auto& [tensor, value] : weights.tensors) CHECK(value.scalar_type() == dtype);
  }
}
