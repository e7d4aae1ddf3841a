#pragma once
// Helpers of the end-to-end tests that run nmt-train and nmt-ckpt (NMT_TRAIN_BIN and
// NMT_CKPT_BIN are compile definitions of those test binaries). Checks of every binary's
// output are in e2e_fixture.h, file and command helpers in ../test_support.h.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

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

/// The JSON values of a text: the text itself when it is one value (summary.json), else each
/// line that is one (metrics.jsonl); a line that is not JSON is left out.
inline std::vector<nlohmann::ordered_json> json_values(const std::string& text) {
  auto whole = nlohmann::ordered_json::parse(text, nullptr, false);
  if (!whole.is_discarded()) return {std::move(whole)};
  std::vector<nlohmann::ordered_json> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    auto value = nlohmann::ordered_json::parse(line, nullptr, false);
    if (!value.is_discarded()) out.push_back(std::move(value));
  }
  return out;
}

/// Appends every member named `key` below `value` to out, depth first in document order.
inline void collect_members(const nlohmann::ordered_json& value, const std::string& key,
                            std::vector<nlohmann::ordered_json>& out) {
  if (value.is_object()) {
    for (const auto& [name, member] : value.items()) {
      if (name == key) out.push_back(member);
      collect_members(member, key, out);
    }
  } else if (value.is_array()) {
    for (const auto& item : value) collect_members(item, key, out);
  }
}

/// Every member named `key` in the JSON of a text (json_values), in document order, at any depth.
inline std::vector<nlohmann::ordered_json> json_members(const std::string& text,
                                                        const std::string& key) {
  std::vector<nlohmann::ordered_json> out;
  for (const auto& value : json_values(text)) collect_members(value, key, out);
  return out;
}

/// The first number that a member named `key` holds in JSON text (at any depth), or nullopt.
inline std::optional<double> json_number(const std::string& json, const std::string& key) {
  for (const auto& member : json_members(json, key))
    if (member.is_number()) return member.get<double>();
  return std::nullopt;
}

/// The first string that a member named `key` holds in JSON text (at any depth), or nullopt.
inline std::optional<std::string> json_string(const std::string& json, const std::string& key) {
  for (const auto& member : json_members(json, key))
    if (member.is_string()) return member.get<std::string>();
  return std::nullopt;
}

/// The strings of the first array that a member named `key` holds in JSON text.
inline std::vector<std::string> json_strings(const std::string& json, const std::string& key) {
  std::vector<std::string> out;
  for (const auto& member : json_members(json, key)) {
    if (!member.is_array()) continue;
    for (const auto& item : member)
      if (item.is_string()) out.push_back(item.get<std::string>());
    break;
  }
  return out;
}

}  // namespace nmt::test
