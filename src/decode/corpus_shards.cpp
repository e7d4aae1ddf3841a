#include "decode/corpus_shards.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_text.h"
#include "util/log.h"

namespace nmt::decode {
namespace fs = std::filesystem;
namespace {

constexpr const char* kManifestName = "manifest.json";
constexpr const char* kManifestLockName = "manifest.lock";

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  NMT_CHECK(in.is_open(), DataError, "{}: cannot open for reading", file.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// "shard-" + 8 digits.
bool is_shard_stem(std::string_view stem) {
  constexpr std::string_view kPrefix = "shard-";
  if (stem.size() != kPrefix.size() + 8 || stem.substr(0, kPrefix.size()) != kPrefix) return false;
  return std::all_of(stem.begin() + kPrefix.size(), stem.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::vector<std::string> manifest_differences(const Manifest& expected, const Manifest& found) {
  auto value_of = [](const Manifest& m, const std::string& key) -> const std::string* {
    for (const auto& [k, v] : m)
      if (k == key) return &v;
    return nullptr;
  };
  std::vector<std::string> keys;
  for (const auto& [key, value] : expected) {
    const std::string* other = value_of(found, key);
    if (!other || *other != value) keys.push_back(key);
  }
  for (const auto& [key, value] : found)
    if (!value_of(expected, key)) keys.push_back(key);
  return keys;
}

std::string manifest_json(const Manifest& manifest) {
  nlohmann::ordered_json o = nlohmann::ordered_json::object();
  for (const auto& [key, value] : manifest) o[key] = value;
  return json::pretty(o) + "\n";
}

Manifest parse_manifest(const std::string& text, const std::string& origin) {
  nlohmann::ordered_json o;
  try {
    o = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("{}: not JSON: {}", origin, e.what()));
  }
  NMT_CHECK(o.is_object(), DataError, "{}: expected a JSON object", origin);
  Manifest manifest;
  for (const auto& [key, value] : o.items()) {
    NMT_CHECK(value.is_string(), DataError, "{}: key \"{}\": expected a string", origin, key);
    manifest.emplace_back(key, value.get<std::string>());
  }
  return manifest;
}

fs::path parts_folder(const fs::path& output) {
  fs::path folder = output;
  folder += ".parts";
  return folder;
}

std::string shard_file_name(int64_t shard, std::string_view ext) {
  return fmt::format("shard-{:08d}.{}", shard, ext);
}

bool is_shard_file_name(std::string_view name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return false;
  const std::string_view ext = name.substr(dot + 1);
  return is_shard_stem(name.substr(0, dot)) && (ext == "txt" || ext == "json");
}

ShardFolder::ShardFolder(const fs::path& output, const Manifest& manifest, bool force,
                         bool remove_temps)
    : path_(parts_folder(output)) {
  fs::create_directories(path_);
  const FileLock lock = FileLock::wait_for(path_ / kManifestLockName, [] {});
  const fs::path file = path_ / kManifestName;
  if (fs::exists(file)) {
    const std::vector<std::string> differ =
        manifest_differences(manifest, parse_manifest(read_text(file), file.string()));
    if (!differ.empty()) {
      NMT_CHECK(force, ConfigError,
                "{} holds the shards of a run with other arguments ({} differ{}); run again "
                "with the same arguments to resume it, or add --force to start over",
                path_.string(), fmt::format("{}", fmt::join(differ, ", ")),
                differ.size() == 1 ? "s" : "");
      log::warn("translate", "--force: {} was made with other arguments ({}): starting over",
                path_.string(), fmt::format("{}", fmt::join(differ, ", ")));
      for (const fs::directory_entry& entry : fs::directory_iterator(path_))
        if (is_shard_file_name(entry.path().filename().string())) fs::remove(entry.path());
      write_file_atomically(file, manifest_json(manifest));
    }
  } else {
    write_file_atomically(file, manifest_json(manifest));
  }
  if (remove_temps) {
    const auto removed = remove_dead_temps(path_, [](std::string_view base) {
      return is_shard_file_name(base) || base == kManifestName;
    });
    for (const fs::path& temp : removed)
      log::info("translate", "removed {}, left by a writer that is gone", temp.string());
  }
}

bool ShardFolder::done(int64_t shard) const {
  return fs::exists(path_ / shard_file_name(shard, "txt"));
}

std::optional<FileLock> ShardFolder::claim(int64_t shard, bool wait) const {
  if (done(shard)) return std::nullopt;
  const fs::path file = path_ / shard_file_name(shard, "lock");
  FileLock lock = wait ? FileLock::wait_for(file, [] {}) : FileLock::try_lock(file);
  if (lock.state() == FileLock::State::kBusy) return std::nullopt;
  // Its holder may have finished it between the check above and the lock.
  if (done(shard)) return std::nullopt;
  return lock;
}

void ShardFolder::commit(int64_t shard, std::string_view text, const ShardRecord& record) const {
  nlohmann::ordered_json o;
  o["rank"] = record.rank;
  o["run"] = record.run;
  o["lines"] = record.lines;
  o["source_tokens"] = record.source_tokens;
  o["output_tokens"] = record.output_tokens;
  o["seconds"] = record.seconds;
  write_file_atomically(path_ / shard_file_name(shard, "json"), json::line(o) + "\n");
  write_file_atomically(path_ / shard_file_name(shard, "txt"), text);
}

std::vector<ShardRecord> ShardFolder::records(int64_t shards) const {
  std::vector<ShardRecord> records;
  for (int64_t i = 0; i < shards; ++i) {
    const fs::path file = path_ / shard_file_name(i, "json");
    try {
      const auto o = nlohmann::ordered_json::parse(read_text(file));
      records.push_back({o.at("rank").get<int64_t>(), o.at("run").get<std::string>(),
                         o.at("lines").get<int64_t>(), o.at("source_tokens").get<int64_t>(),
                         o.at("output_tokens").get<int64_t>(), o.at("seconds").get<double>()});
    } catch (const nlohmann::json::exception& e) {
      throw DataError(fmt::format("{}: bad shard record: {}", file.string(), e.what()));
    }
  }
  return records;
}

void ShardFolder::assemble(const fs::path& output, int64_t shards) const {
  AtomicFileWriter writer(output);
  std::vector<char> buffer(1 << 20);
  for (int64_t i = 0; i < shards; ++i) {
    const fs::path file = path_ / shard_file_name(i, "txt");
    std::ifstream in(file, std::ios::binary);
    NMT_CHECK(in.is_open(), DataError, "{}: cannot open for reading", file.string());
    while (in) {
      in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      if (in.gcount() > 0) writer.write(buffer.data(), static_cast<size_t>(in.gcount()));
    }
    NMT_CHECK(in.eof(), DataError, "{}: read error", file.string());
  }
  writer.commit();
  fs::remove_all(path_);
}

int64_t shard_lines_for(int64_t requested, int64_t lines, int world_size,
                        std::optional<int64_t> stored) {
  if (requested > 0) return requested;
  if (stored && *stored > 0) return *stored;
  constexpr int64_t kMost = 10000;
  const int64_t ranks = std::max(world_size, 1);
  return std::clamp<int64_t>((lines + ranks - 1) / ranks, 1, kMost);
}

std::optional<int64_t> stored_shard_lines(const fs::path& output) {
  const fs::path file = parts_folder(output) / kManifestName;
  try {
    if (!fs::exists(file)) return std::nullopt;
    for (const auto& [key, value] : parse_manifest(read_text(file), file.string()))
      if (key == "shard_lines") return std::stoll(value);
  } catch (const std::exception&) {
    // Unreadable: ShardFolder's check of the manifest reports it.
  }
  return std::nullopt;
}

}  // namespace nmt::decode
