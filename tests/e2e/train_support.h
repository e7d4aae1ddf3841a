#pragma once
// Helpers of the end-to-end tests that run nmt-train and nmt-ckpt (NMT_TRAIN_BIN and
// NMT_CKPT_BIN are compile definitions of those test binaries). Checks of every binary's
// output are in e2e_fixture.h, file and command helpers in ../test_support.h.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "e2e_fixture.h"
#include "test_support.h"

namespace nmt::test {

inline const std::string kTrainBin = NMT_TRAIN_BIN;
inline const std::string kCkptBin = NMT_CKPT_BIN;

/// A 1000-piece vocabulary trained once per test binary (on the first 18,000 pairs, see
/// train_slice_flags()), so each run skips SentencePiece.
inline const std::string& shared_vocab() {
  static TempDir dir;
  static const std::string model = [] {
    auto r = run_command(kTrainBin +
                         " --config configs/tiny.yaml --dry-run --log-level warn "
                         "--set data.vocab_size=1000 --set run_dir=" +
                         dir.path().string() + train_slice_flags());
    if (r.exit_code != 0) FAIL("vocabulary dry run failed: " << r.err);
    return (dir.path() / "vocab" / "joint.model").string();
  }();
  return model;
}

/// Flags of a small, fast nmt-train run of configs/tiny.yaml in run_dir: the shared vocabulary,
/// batches of 1024 padded tokens, one thread, no validation, a log line and a checkpoint every
/// `every` steps.
inline std::string small_run_flags(const std::filesystem::path& run_dir, int every = 4) {
  const std::string n = std::to_string(every);
  return " --config configs/tiny.yaml --set run_dir=" + run_dir.string() +
         " --set data.spm_model=" + shared_vocab() +
         " --set data.max_tokens=1024 --set train.log_every=" + n +
         " --set train.valid_every=0 --set checkpoint.every_steps=" + n + " --set train.threads=1";
}

/// small_run_flags for runs that must agree bit for bit with another: no dropout (ranks draw
/// different masks; one thread per process already, since the thread count changes float
/// summation order), a checkpoint every 2 steps.
inline std::string exact_run_flags(const std::filesystem::path& run_dir) {
  return small_run_flags(run_dir, 2) + " --set model.dropout=0";
}

/// Path of the checkpoint of `step` in a run directory.
inline std::string checkpoint_path(const std::filesystem::path& run_dir, int step) {
  char name[64];
  std::snprintf(name, sizeof(name), "checkpoint-%08d.safetensors", step);
  return (run_dir / "checkpoints" / name).string();
}

/// Exit code of `nmt-ckpt diff --atol ATOL a b`: 0 when every model tensor is within atol.
inline int checkpoint_diff(const std::string& a, const std::string& b, const std::string& atol) {
  auto r = run_command(kCkptBin + " diff --atol " + atol + " " + a + " " + b);
  if (r.exit_code != 0) UNSCOPED_INFO("nmt-ckpt diff: " << r.out << r.err);
  return r.exit_code;
}

/// The first number written as `"key": N` in JSON text, or nullopt. (Our JSON reader,
/// util/json.h, takes the integer-only subset of safetensors headers.)
inline std::optional<double> json_number(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\": (-?[0-9.eE+]+)"))) return std::nullopt;
  return std::stod(m[1]);
}

/// The first string written as `"key": "S"` in JSON text (no escapes), or nullopt.
inline std::optional<std::string> json_string(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\": \"([^\"]*)\""))) return std::nullopt;
  return m[1].str();
}

/// Every string of the array written as `"key": ["A", "B"]` in JSON text.
inline std::vector<std::string> json_strings(const std::string& json, const std::string& key) {
  std::smatch m;
  std::vector<std::string> out;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\": \\[([^\\]]*)\\]"))) return out;
  const std::string items = m[1].str();
  const std::regex item("\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(items.begin(), items.end(), item); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1].str());
  return out;
}

}  // namespace nmt::test
