#include "data/file_hash.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include <fstream>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/phase_progress.h"

namespace nmt::data {
namespace {

/// How long ago a file's last modification must be for its hash to be remembered.
constexpr uint64_t kSettledNs = 2000000000ull;

/// What stat() says of a file: the memo's key besides its path.
struct FileStamp {
  uint64_t size = 0, mtime_ns = 0, inode = 0, device = 0;
};

std::optional<FileStamp> stamp_of(const std::filesystem::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return std::nullopt;
  FileStamp s;
  s.size = static_cast<uint64_t>(st.st_size);
  s.mtime_ns = static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000ull +
               static_cast<uint64_t>(st.st_mtim.tv_nsec);
  s.inode = static_cast<uint64_t>(st.st_ino);
  s.device = static_cast<uint64_t>(st.st_dev);
  return s;
}

nlohmann::json stamp_json(const FileStamp& s) {
  return {{"size", s.size}, {"mtime_ns", s.mtime_ns}, {"inode", s.inode}, {"device", s.device}};
}

/// The memo's entries (an empty object when it is missing or unreadable).
nlohmann::json read_memo(const std::filesystem::path& memo) {
  std::ifstream in(memo);
  if (!in) return nlohmann::json::object();
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("files") || !j["files"].is_object())
    return nlohmann::json::object();
  return j["files"];
}

}  // namespace

uint64_t hash_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  NMT_CHECK(in.good(), DataError, "{}: cannot read", file.string());
  std::error_code size_error;
  const auto size = std::filesystem::file_size(file, size_error);
  const double total = size_error ? 0.0 : double(size);  // 0: unknown (no share, no ETA)
  const std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                       &XXH3_freeState);
  NMT_CHECK(state != nullptr, DataError, "{}: cannot hash (out of memory)", file.string());
  XXH3_64bits_reset(state.get());
  log::PhaseProgress progress("data", "hashing " + file.filename().string(), "bytes", total);
  std::vector<char> buffer(4 << 20);
  double done = 0;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto n = static_cast<size_t>(in.gcount());
    XXH3_64bits_update(state.get(), buffer.data(), n);
    done += double(n);
    progress.update(done);
  }
  NMT_CHECK(in.eof(), DataError, "{}: read error after {} bytes", file.string(), done);
  if (progress.reported()) progress.finish(done);
  return XXH3_64bits_digest(state.get());
}

std::string hash_file_hex(const std::filesystem::path& file) {
  return fmt::format("{:016x}", hash_file(file));
}

uint64_t hash_file_remembered(const std::filesystem::path& file,
                              const std::filesystem::path& memo_dir) {
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(file, error);
  const std::string key = (error ? file : absolute).lexically_normal().string();
  const std::filesystem::path memo = memo_dir / "file-hashes.json";
  const std::optional<FileStamp> before = stamp_of(file);
  nlohmann::json files = read_memo(memo);
  if (before && files.contains(key) && files[key].is_object()) {
    const nlohmann::json& entry = files[key];
    nlohmann::json stamp = entry;
    stamp.erase("xxh3");
    if (stamp == stamp_json(*before) && entry.contains("xxh3") && entry["xxh3"].is_string()) {
      try {
        return std::stoull(entry["xxh3"].get<std::string>(), nullptr, 16);
      } catch (const std::exception&) {
        // a damaged entry: read the file below
      }
    }
  }
  const uint64_t hash = hash_file(file);
  // Remembered only when the file did not change while it was read.
  const std::optional<FileStamp> after = stamp_of(file);
  if (!before || !after || stamp_json(*before) != stamp_json(*after)) return hash;
  // Nor when it was modified within the last seconds: file systems keep modification times
  // in ticks of a few milliseconds, so a write in the same tick after this reading would
  // leave the stamp as it is now (git's "racily clean" entries). A corpus is older than that.
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const uint64_t now_ns =
      static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
  if (now_ns < after->mtime_ns + kSettledNs) return hash;
  nlohmann::json entry = stamp_json(*after);
  entry["xxh3"] = fmt::format("{:016x}", hash);
  files[key] = std::move(entry);
  // Written whole to a temporary file and renamed: ranks that hash at once each leave a
  // complete memo (the last one's), never a torn one.
  std::filesystem::create_directories(memo_dir, error);
  const std::filesystem::path tmp =
      memo_dir / fmt::format("file-hashes.json.{}.tmp", static_cast<long>(::getpid()));
  {
    std::ofstream out(tmp);
    out << nlohmann::json{{"version", 1}, {"files", files}}.dump(2) << '\n';
    if (!out) {
      std::filesystem::remove(tmp, error);
      return hash;
    }
  }
  std::filesystem::rename(tmp, memo, error);
  if (error) std::filesystem::remove(tmp, error);
  return hash;
}

}  // namespace nmt::data
