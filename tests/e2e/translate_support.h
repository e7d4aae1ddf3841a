#pragma once
// The tiny run that nmt-translate's end-to-end tests translate with: configs/tiny.yaml, 20
// updates on the first 18,000 training pairs, a 500-piece vocabulary, checkpoints at 10 and 20.
// Trained once per build (again when nmt-train changed), under a lock, so that every case of
// test_e2e_translate, run alone or in parallel, shares it instead of training its own.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_support.h"
#include "util/file_lock.h"

namespace nmt::test {

/// The run directory of the shared tiny run (trained by the first caller).
inline std::filesystem::path translate_run_dir() {
  namespace fs = std::filesystem;
  const std::string train = NMT_TRAIN_BIN;
  const fs::path dir = fs::path(NMT_BINARY_DIR) / "tests" / "work" / "translate-run";
  fs::create_directories(dir);
  const FileLock lock = FileLock::wait_for(dir / "train.lock", [] {});
  const fs::path run = dir / "run";
  const std::string stamp = std::to_string(fs::last_write_time(train).time_since_epoch().count());
  const fs::path last = run / "checkpoints" / "checkpoint-00000020.safetensors";
  if (fs::exists(last) && fs::exists(dir / "stamp") && read_file(dir / "stamp") == stamp)
    return run;
  fs::remove_all(run);
  const CommandResult trained = run_command(
      train + " --config configs/tiny.yaml --log-level warn --set run_dir=" + run.string() +
      " --set train.max_steps=20 --set data.vocab_size=500 --set train.valid_every=0"
      " --set checkpoint.every_steps=10" +
      train_slice_flags());
  INFO(trained.err);
  REQUIRE(trained.exit_code == 0);
  std::ofstream(dir / "stamp") << stamp;
  return run;
}

}  // namespace nmt::test
