// hf/hf_export: every shipped config trains a model that exports to transformers, and a model
// that does not export is refused before anything is written. What transformers makes of an
// export is tests/scripts/test_hf_export.py.
#include "catch_torch.h"  // first: see the header

#include <filesystem>
#include <string>

#include "checkpoint/hf_config_writer.h"
#include "config/run_config.h"
#include "hf/hf_export.h"
#include "test_support.h"
#include "util/error.h"

using Catch::Matchers::Contains;

TEST_CASE("every shipped config trains a model that exports to transformers", "[hf]") {
  for (const char* name :
       {"configs/demo.yaml", "configs/tiny.yaml", "configs/multilingual-tiny.yaml",
        "configs/transformer-base.yaml", "configs/transformer-big.yaml"}) {
    INFO(name);
    const nmt::config::RunConfig config = nmt::config::load_run_config({name});
    const auto vocab = config.data.vocab_size;
    CHECK_NOTHROW(nmt::checkpoint::hf_config_for(config.model, {vocab, vocab, 0, 3, 2}));
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
  const nmt::test::TempDir dir;
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
