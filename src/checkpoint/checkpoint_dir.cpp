#include "checkpoint/checkpoint_dir.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <tuple>

#include <fmt/format.h>

#include "util/atomic_file.h"
#include "checkpoint/run_metadata.h"
#include "util/error.h"
#include "util/log.h"

namespace nmt::checkpoint {
namespace {

constexpr std::string_view kPrefix = "checkpoint-";
constexpr std::string_view kSuffix = ".safetensors";

/// The selection value of a checkpoint file; nullopt also when its header cannot be read.
std::optional<double> selection_of_file(const std::filesystem::path& file) {
  try {
    return checkpoint::selection_of(read_checkpoint_metadata(file));
  } catch (const CheckpointError&) {
    return std::nullopt;
  }
}

/// The message of a CheckpointError without the "<file>: " it starts with.
std::string reason_of(const CheckpointError& error, const std::filesystem::path& file) {
  const std::string message = error.what();
  const std::string prefix = file.string() + ": ";
  return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

}  // namespace

std::optional<int64_t> step_of_checkpoint_file(const std::filesystem::path& file) {
  const std::string name = file.filename().string();
  if (name.size() <= kPrefix.size() + kSuffix.size() || name.rfind(kPrefix, 0) != 0 ||
      name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return std::nullopt;
  }
  const std::string digits =
      name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.size() > 18) return std::nullopt;  // would overflow int64
  int64_t step = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    step = step * 10 + (c - '0');
  }
  return step;
}

CheckpointDir::CheckpointDir(std::filesystem::path dir, CheckpointOptions options)
    : dir_(std::move(dir)), options_(options) {
  NMT_CHECK(options_.keep_last >= 0, ConfigError,
            "checkpoint.keep_last: expected an integer >= 0, found {}", options_.keep_last);
  NMT_CHECK(options_.keep_best >= 0, ConfigError,
            "checkpoint.keep_best: expected an integer >= 0, found {}", options_.keep_best);
}

std::filesystem::path CheckpointDir::path_for_step(int64_t step) const {
  NMT_CHECK(step >= 0, CheckpointError, "checkpoint step must be >= 0, found {}", step);
  return dir_ / fmt::format("{}{:08d}{}", kPrefix, step, kSuffix);
}

std::vector<std::filesystem::path> CheckpointDir::list() const {
  std::vector<std::pair<int64_t, std::filesystem::path>> found;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir_, ec);
  if (ec) {
    // No folder yet means no checkpoints; anything else (permissions, ...) is worth saying.
    NMT_CHECK(ec == std::errc::no_such_file_or_directory, CheckpointError,
              "{}: cannot list checkpoints: {}", dir_.string(), ec.message());
    return {};
  }
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const auto step = step_of_checkpoint_file(it->path());
    std::error_code type_error;  // a file deleted meanwhile is simply not listed
    if (step && it->is_regular_file(type_error)) found.emplace_back(*step, it->path());
  }
  NMT_CHECK(!ec, CheckpointError, "{}: cannot list checkpoints: {}", dir_.string(), ec.message());
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::filesystem::path> files;
  for (auto& entry : found) files.push_back(std::move(entry.second));
  return files;
}

void CheckpointDir::remove_stale_temp_files() const {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(kPrefix, 0) != 0 || !is_temp_file_name(name)) continue;
    // Only rank 0 saves, one save at a time, so any temp file here is a crashed save's.
    std::error_code remove_error;
    if (std::filesystem::remove(it->path(), remove_error)) {
      log::info("checkpoint", "removed {}, left by an interrupted save", it->path().string());
    } else if (remove_error) {
      log::warn("checkpoint", "cannot remove {}: {}", it->path().string(), remove_error.message());
    }
  }
}

std::optional<std::filesystem::path> CheckpointDir::set_aside_after(int64_t step) const {
  std::vector<std::filesystem::path> newer;
  for (const auto& file : list()) {
    if (*step_of_checkpoint_file(file) > step) newer.push_back(file);
  }
  if (newer.empty()) return std::nullopt;
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  const std::string stamp =
      fmt::format("superseded-{:04}{:02}{:02}T{:02}{:02}{:02}Z", utc.tm_year + 1900, utc.tm_mon + 1,
                  utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec);
  std::filesystem::path folder;
  std::error_code ec;
  for (int n = 1;; ++n) {  // a folder this call made, never one that was there
    folder = dir_ / (n == 1 ? stamp : fmt::format("{}-{}", stamp, n));
    if (std::filesystem::create_directory(folder, ec)) break;
    NMT_CHECK(!ec, CheckpointError, "{}: cannot create {} for the checkpoints after step {}: {}",
              dir_.string(), folder.string(), step, ec.message());
  }
  for (const auto& file : newer) {
    std::filesystem::rename(file, folder / file.filename(), ec);
    NMT_CHECK(!ec, CheckpointError, "{}: cannot move it into {}: {}", file.string(),
              folder.string(), ec.message());
  }
  log::warn("checkpoint",
            "a run starts from step {}: the {} checkpoint(s) of later steps, of the run it "
            "replaces, are moved to {} (delete it when they are not needed)",
            step, newer.size(), folder.string());
  return folder;
}

std::filesystem::path CheckpointDir::save(int64_t step, const CheckpointData& data) {
  const std::filesystem::path file = path_for_step(step);
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  NMT_CHECK(!ec, CheckpointError, "{}: cannot create the checkpoint folder: {}", dir_.string(),
            ec.message());
  // Before writing: a save that died on a full disk left a temp file that takes the space
  // this one needs.
  remove_stale_temp_files();
  save_checkpoint(file, data);
  apply_retention(file);
  return file;
}

void CheckpointDir::apply_retention(const std::filesystem::path& keep) const {
  const std::vector<std::filesystem::path> files = list();  // newest first
  std::set<std::filesystem::path> kept{keep};
  for (size_t i = 0; i < files.size() && i < static_cast<size_t>(options_.keep_last); ++i)
    kept.insert(files[i]);
  if (options_.keep_best > 0) {
    std::vector<std::tuple<double, int64_t, std::filesystem::path>> ranked;
    for (const auto& file : files) {
      // A NaN (a diverged validation) is no candidate, and would break the sort's ordering.
      if (const auto loss = selection_of_file(file); loss && !std::isnan(*loss))
        ranked.emplace_back(*loss, *step_of_checkpoint_file(file), file);
    }
    // Lowest loss first; on a tie the earlier step, which reached that loss first.
    std::sort(ranked.begin(), ranked.end());
    for (size_t i = 0; i < ranked.size() && i < static_cast<size_t>(options_.keep_best); ++i)
      kept.insert(std::get<2>(ranked[i]));
  }
  for (const auto& file : files) {
    if (kept.count(file)) continue;
    std::error_code ec;
    std::filesystem::remove(file, ec);
    if (ec) {
      log::warn("checkpoint", "cannot delete old checkpoint {}: {}", file.string(), ec.message());
    } else {
      log::debug("checkpoint", "deleted old checkpoint {}", file.string());
    }
  }
}

std::optional<std::pair<std::filesystem::path, CheckpointData>> CheckpointDir::load_newest_valid(
    const CheckpointFilter& reject) const {
  std::optional<std::pair<std::filesystem::path, std::string>> first_rejected;
  for (const auto& file : list()) {
    CheckpointData data;
    try {
      data = map_checkpoint(file);  // the node's ranks share its pages (checkpoint_file.h)
    } catch (const CheckpointError& e) {
      log::warn("checkpoint", "skipping {}: {}", file.string(), reason_of(e, file));
      continue;
    }
    if (reject) {
      std::optional<std::string> why;
      try {
        why = reject(data);
      } catch (const CheckpointError& e) {
        // Damaged metadata (a malformed number, a missing key): skipped like a damaged file.
        log::warn("checkpoint", "skipping {}: {}", file.string(), reason_of(e, file));
        continue;
      }
      if (why) {
        log::warn("checkpoint", "skipping {}: {}", file.string(), *why);
        if (!first_rejected) first_rejected.emplace(file, *why);
        continue;
      }
    }
    return std::make_pair(file, std::move(data));
  }
  NMT_CHECK(!first_rejected, CheckpointError,
            "{}: {}; no checkpoint in {} fits this run: resume from a file (--resume PATH), "
            "start fresh in another run_dir, or pass --resume none to start over here",
            first_rejected->first.string(), first_rejected->second, dir_.string());
  return std::nullopt;
}

std::optional<std::filesystem::path> CheckpointDir::best_or_last() const {
  std::optional<std::filesystem::path> newest;
  std::optional<std::pair<double, std::filesystem::path>> best;
  // Newest first, and `<=` below: on a tie the earlier step wins, as in apply_retention.
  for (const auto& file : list()) {
    std::map<std::string, std::string> metadata;
    try {
      metadata = read_checkpoint_metadata(file);
    } catch (const CheckpointError& e) {
      log::warn("checkpoint", "skipping {}: {}", file.string(), reason_of(e, file));
      continue;
    }
    if (!newest) newest = file;
    if (const auto loss = checkpoint::selection_of(metadata);
        loss && !std::isnan(*loss) && (!best || *loss <= best->first))
      best = std::make_pair(*loss, file);
  }
  if (best) return best->second;
  return newest;
}

std::vector<std::filesystem::path> model_checkpoints(const std::string& given, int64_t average) {
  const std::filesystem::path path(given);
  std::error_code ec;
  NMT_CHECK(!given.empty(), ConfigError, "no checkpoint given (a checkpoint file or run directory)");
  if (std::filesystem::is_regular_file(path, ec)) {
    NMT_CHECK(average <= 1, ConfigError,
              "--average {} needs a run directory (or its checkpoints/ folder), found the file {}",
              average, given);
    return {path};
  }
  NMT_CHECK(std::filesystem::is_directory(path, ec), CheckpointError,
            "{}: no such checkpoint file or run directory", given);
  const std::filesystem::path dir =
      std::filesystem::is_directory(path / "checkpoints", ec) ? path / "checkpoints" : path;
  const CheckpointDir checkpoints(dir, CheckpointOptions{});
  if (average > 1) {
    std::vector<std::filesystem::path> newest = checkpoints.list();
    NMT_CHECK(static_cast<int64_t>(newest.size()) >= average, CheckpointError,
              "{}: --average {} needs {} checkpoints, found {}", dir.string(), average, average,
              newest.size());
    newest.resize(static_cast<size_t>(average));
    std::reverse(newest.begin(), newest.end());
    return newest;
  }
  const auto chosen = checkpoints.best_or_last();
  NMT_CHECK(chosen.has_value(), CheckpointError, "{}: no checkpoint-*.safetensors files",
            dir.string());
  return {*chosen};
}

}  // namespace nmt::checkpoint
