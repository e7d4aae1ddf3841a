// util/output_guard: what --force may replace, and outputs that overlap their input, by real
// path (links resolved). export-hf, import-hf and export-ctranslate2.py decide with it (#44).
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "test_support.h"
#include "util/error.h"
#include "util/output_guard.h"

using Catch::Matchers::Contains;
using nmt::check_output_apart;
using nmt::check_replaceable_dir;
using nmt::path_within;
using nmt::test::TempDir;
namespace fs = std::filesystem;

TEST_CASE("output guard: a path lies within itself and its folders, not beside them",
          "[output_guard]") {
  const TempDir dir;
  const fs::path run = dir.path() / "runs/demo";
  fs::create_directories(run / "checkpoints");
  CHECK(path_within(run, run));
  CHECK(path_within(run / "checkpoints", run));
  CHECK(path_within(run / "hf/new", run));  // not there yet
  CHECK(path_within(run.string() + "/", run));
  CHECK(path_within(run / ".", run));
  CHECK(path_within(run / "checkpoints/..", run));
  CHECK_FALSE(path_within(run, run / "checkpoints"));
  CHECK_FALSE(path_within(dir.path() / "runs/demo2", run));  // a name that extends it
  CHECK_FALSE(path_within(dir.path() / "runs", run));
}

TEST_CASE("output guard: links are resolved before paths are compared", "[output_guard]") {
  const TempDir dir;
  const fs::path run = dir.path() / "runs/demo";
  fs::create_directories(run);
  fs::create_directory_symlink(run, dir.path() / "link");
  CHECK(path_within(dir.path() / "link", run));
  CHECK(path_within(dir.path() / "link/hf", run));
  CHECK(path_within(run, dir.path() / "link"));
  CHECK_FALSE(path_within(dir.path() / "link", dir.path() / "elsewhere"));
}

TEST_CASE("output guard: an output that is, holds or lies inside its input is refused",
          "[output_guard]") {
  const TempDir dir;
  const fs::path run = dir.path() / "runs/demo";
  fs::create_directories(run / "checkpoints");
  const fs::path ckpt = dir.write("runs/demo/checkpoints/ckpt-1.safetensors", "x");
  CHECK_THROWS_WITH(check_output_apart(run, run, "the run"),
                    Contains("the output is the run") && Contains(run.string()));
  CHECK_THROWS_WITH(check_output_apart(dir.path() / "runs", ckpt, "the checkpoint"),
                    Contains("holds the checkpoint"));
  CHECK_THROWS_WITH(check_output_apart(run / "checkpoints/out", run / "checkpoints", "HF_DIR"),
                    Contains("lies inside HF_DIR"));
  CHECK_THROWS_AS(check_output_apart(run / ".", run, "IN"), nmt::ConfigError);
  fs::create_directory_symlink(dir.path() / "runs", dir.path() / "link");
  CHECK_THROWS_WITH(check_output_apart(dir.path() / "link/demo", ckpt, "the checkpoint"),
                    Contains("holds the checkpoint"));
  CHECK_NOTHROW(check_output_apart(dir.path() / "hf", run, "the run"));
  CHECK_NOTHROW(check_output_apart(dir.path() / "runs/demo2", run, "the run"));
}

TEST_CASE("output guard: --force replaces only an empty directory or one with the marker",
          "[output_guard]") {
  const TempDir dir;
  constexpr const char* kMarker = ".made-by-test";
  CHECK_NOTHROW(check_replaceable_dir(dir.path() / "absent", kMarker, "test", false));
  fs::create_directories(dir.path() / "empty");
  CHECK_THROWS_WITH(check_replaceable_dir(dir.path() / "empty", kMarker, "test", false),
                    Contains("exists") && Contains("--force"));
  CHECK_NOTHROW(check_replaceable_dir(dir.path() / "empty", kMarker, "test", true));
  dir.write("ours/.made-by-test", "");
  dir.write("ours/model.bin", "x");
  CHECK_NOTHROW(check_replaceable_dir(dir.path() / "ours", kMarker, "test", true));
  dir.write("run/checkpoints/ckpt-1.safetensors", "x");
  CHECK_THROWS_WITH(
      check_replaceable_dir(dir.path() / "run", kMarker, "test", true),
      Contains("not empty") && Contains("was not written by test") && Contains(kMarker));
  // The marker must be at the top, and a file: a folder of that name is not one.
  dir.write("deep/sub/.made-by-test", "");
  CHECK_THROWS_AS(check_replaceable_dir(dir.path() / "deep", kMarker, "test", true),
                  nmt::ConfigError);
  fs::create_directories(dir.path() / "named/.made-by-test");
  CHECK_THROWS_AS(check_replaceable_dir(dir.path() / "named", kMarker, "test", true),
                  nmt::ConfigError);
  const fs::path file = dir.write("file", "x");
  CHECK_THROWS_WITH(check_replaceable_dir(file, kMarker, "test", true),
                    Contains("is not a directory"));
  // A link, even to an export, is not a directory the writer made.
  fs::create_directory_symlink(dir.path() / "ours", dir.path() / "link");
  CHECK_THROWS_WITH(check_replaceable_dir(dir.path() / "link", kMarker, "test", true),
                    Contains("symbolic link"));
}
