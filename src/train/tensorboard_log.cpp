#include "train/tensorboard_log.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "checkpoint/atomic_file.h"
#include "util/error.h"
#include "util/log.h"

namespace nmt::train {
namespace {

constexpr std::string_view kPrefix = "events.out.tfevents.";

bool is_events_file(const std::filesystem::path& path) {
  return path.filename().string().rfind(kPrefix, 0) == 0;
}

/// The seconds in an events file's name (events.out.tfevents.<seconds>.<host>...), 0 if none.
int64_t name_seconds(const std::filesystem::path& path) {
  const std::string name = path.filename().string().substr(kPrefix.size());
  const size_t digits = name.find_first_not_of("0123456789");
  const std::string number = name.substr(0, digits);
  return number.empty() || number.size() > 18 ? 0 : std::stoll(number);
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

/// A JSON string member as text (nullopt when absent or not a string).
std::optional<std::string> string_member(const json::Object& record, std::string_view key) {
  const auto text = record.member(key);
  if (!text || text->empty() || text->front() != '"') return std::nullopt;
  return json::parse(*text).string;
}

}  // namespace

std::vector<event_file::Scalar> TensorBoardLog::scalars(const json::Object& record, int64_t* step) {
  std::string prefix = string_member(record, "type").value_or("metrics");
  if (const auto set = string_member(record, "set")) prefix += "/" + *set;
  std::vector<event_file::Scalar> out;
  bool has_step = false;
  for (const auto& [path, value] : record.numbers()) {
    if (path == "step") {
      *step = static_cast<int64_t>(value);
      has_step = true;
    } else {
      out.push_back({prefix + "/" + path, static_cast<float>(value)});
    }
  }
  if (!has_step) out.clear();
  return out;
}

bool TensorBoardLog::drop_after(const std::filesystem::path& file, int64_t last_step) {
  const event_file::RecordScan scan = event_file::read_records(file);
  std::string kept;
  size_t kept_records = 0, kept_scalars = 0;
  for (const std::string& payload : scan.payloads) {
    const event_file::Event event = event_file::decode_event(payload);
    if (!event.scalars.empty() && event.step > last_step) continue;
    kept += event_file::frame_record(payload);
    ++kept_records;
    kept_scalars += event.scalars.size();
  }
  if (kept_scalars == 0) {  // nothing to show: a run that logged no step before it ended
    std::filesystem::remove(file);
    return true;
  }
  if (kept_records == scan.payloads.size() && !scan.damaged_tail) return false;
  checkpoint::AtomicFileWriter writer(file);
  writer.write(kept.data(), kept.size());
  writer.commit();
  return true;
}

TensorBoardLog::TensorBoardLog(const std::filesystem::path& folder, int64_t first_step) {
  std::filesystem::create_directories(folder);
  // The files of earlier runs: a new name sorts after theirs, since TensorBoard reads a
  // folder's files in name order.
  int64_t seconds = static_cast<int64_t>(now_seconds());
  std::vector<std::filesystem::path> earlier;  // listed first: rewriting adds and renames files
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    if (entry.is_regular_file() && is_events_file(entry.path())) earlier.push_back(entry.path());
  std::sort(earlier.begin(), earlier.end());
  size_t dropped_from = 0;
  for (const std::filesystem::path& path : earlier) {
    if (checkpoint::is_temp_file_name(path.filename().string())) {
      std::filesystem::remove(path);  // a rewrite that a crash interrupted
      continue;
    }
    if (drop_after(path, first_step)) ++dropped_from;
    seconds = std::max(seconds, name_seconds(path) + 1);
  }
  if (dropped_from > 0)
    log::info("train", "tensorboard: dropped the events after step {} from {} earlier file(s)",
              first_step, dropped_from);
  file_ = folder / fmt::format("{}{:010d}.{}.{}", kPrefix, seconds, host_name(), ::getpid());
  out_.open(file_, std::ios::binary | std::ios::app);
  NMT_CHECK(out_.good(), Error, "{}: cannot open for writing: {}", file_.string(),
            std::strerror(errno));
  append({now_seconds(), 0, "brain.Event:2", {}});
}

void TensorBoardLog::write(const json::Object& record) {
  int64_t step = 0;
  std::vector<event_file::Scalar> scalars = TensorBoardLog::scalars(record, &step);
  if (!scalars.empty()) append({now_seconds(), step, "", std::move(scalars)});
}

void TensorBoardLog::append(const event_file::Event& event) {
  out_ << event_file::frame_record(event_file::encode_event(event)) << std::flush;
  NMT_CHECK(out_.good(), Error, "{}: write failed: {}", file_.string(), std::strerror(errno));
}

}  // namespace nmt::train
