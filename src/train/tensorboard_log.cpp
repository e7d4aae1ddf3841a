#include "train/tensorboard_log.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/atomic_file.h"
#include "util/host_name.h"
#include "util/log.h"

namespace nmt::train {
namespace {

constexpr std::string_view kPrefix = "events.out.tfevents.";
constexpr std::string_view kOurSuffix = ".nmt-train";
// The base of a rewrite's temp file ("<base>.tmp-<pid>"): without "tfevents", so TensorBoard
// does not read a file while it is being written.
constexpr std::string_view kTempBase = "nmt-train-rewrite";

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

/// A JSON string member as text (nullopt when absent or not a string).
std::optional<std::string> string_member(const nlohmann::ordered_json& record, const char* key) {
  const auto it = record.find(key);
  if (it == record.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

/// Every finite number below `value` with its path: below `path`, the keys of objects and the
/// indexes of arrays joined by '/' ({"a": {"b": [1, 2]}} gives a/b/0 and a/b/1). Strings,
/// booleans, null and non-finite numbers (which metrics.jsonl writes as null) are left out.
void collect_numbers(const nlohmann::ordered_json& value, const std::string& path,
                     std::vector<std::pair<std::string, const nlohmann::ordered_json*>>& out) {
  const auto below = [&path](const std::string& name) {
    return path.empty() ? name : path + "/" + name;
  };
  if (value.is_object()) {
    for (const auto& [key, member] : value.items()) collect_numbers(member, below(key), out);
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i)
      collect_numbers(value[i], below(std::to_string(i)), out);
  } else if (value.is_number_integer() ||
             (value.is_number_float() && std::isfinite(value.get<double>()))) {
    out.emplace_back(path, &value);
  }
}

/// What a run does at its start: creates folder, drops the later events from it, and names the
/// new events file: its seconds after those of every events file there, ours or not, since
/// TensorBoard reads a folder's files in name order (counted before dropping: a file the drop
/// removes could have had this process's name, in a test).
std::filesystem::path start_in(const std::filesystem::path& folder, int64_t first_step) {
  std::filesystem::create_directories(folder);
  int64_t seconds = static_cast<int64_t>(now_seconds());
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) == 0) seconds = std::max(seconds, name_seconds(entry.path()) + 1);
  }
  TensorBoardLog::drop_events_after(folder, first_step);
  return folder / fmt::format("{}{:010d}.{}.{}{}", kPrefix, seconds,
                              host_name().value_or("localhost"), ::getpid(), kOurSuffix);
}

}  // namespace

std::vector<event_file::Scalar> TensorBoardLog::scalars(const nlohmann::ordered_json& record,
                                                        int64_t* step) {
  std::string prefix = string_member(record, "type").value_or("metrics");
  if (const auto set = string_member(record, "set")) prefix += "/" + *set;
  std::vector<std::pair<std::string, const nlohmann::ordered_json*>> numbers;
  collect_numbers(record, "", numbers);
  std::vector<event_file::Scalar> out;
  bool has_step = false;
  for (const auto& [path, value] : numbers) {
    if (path == "step") {
      *step = value->get<int64_t>();
      has_step = true;
    } else {
      out.push_back({prefix + "/" + path, static_cast<float>(value->get<double>())});
    }
  }
  if (!has_step) out.clear();
  return out;
}

bool TensorBoardLog::is_ours(const std::filesystem::path& file) {
  const std::string name = file.filename().string();
  return name.size() > kPrefix.size() + kOurSuffix.size() && name.rfind(kPrefix, 0) == 0 &&
         name.compare(name.size() - kOurSuffix.size(), kOurSuffix.size(), kOurSuffix) == 0;
}

std::filesystem::path TensorBoardLog::temp_path(const std::filesystem::path& folder) {
  return folder / fmt::format("{}.tmp-{}", kTempBase, ::getpid());
}

TensorBoardLog::Dropped TensorBoardLog::drop_after(const std::filesystem::path& file,
                                                   int64_t last_step,
                                                   const std::filesystem::path& keep_dropped_in) {
  const event_file::RecordScan scan = event_file::read_records(file);
  std::string kept, later;
  size_t kept_records = 0, kept_scalars = 0;
  Dropped dropped;
  for (const std::string& payload : scan.payloads) {
    const event_file::Event event = event_file::decode_event(payload);
    if (!event.scalars.empty() && event.step > last_step) {
      ++dropped.events;
      later += event_file::frame_record(payload);
      continue;
    }
    // Events without scalars (the file's version record) open the set-aside copy too.
    if (event.scalars.empty()) later += event_file::frame_record(payload);
    kept += event_file::frame_record(payload);
    ++kept_records;
    kept_scalars += event.scalars.size();
  }
  // The set-aside copy first: a crash between the two writes leaves an event twice, never
  // nowhere.
  if (!keep_dropped_in.empty() && dropped.events > 0) {
    std::filesystem::create_directories(keep_dropped_in);
    AtomicFileWriter writer(keep_dropped_in / file.filename(), temp_path(keep_dropped_in));
    writer.write(later.data(), later.size());
    writer.commit();
  }
  if (kept_scalars == 0) {  // nothing to show: a run that logged no step before it ended
    std::filesystem::remove(file);
    dropped.changed = true;
    return dropped;
  }
  if (kept_records == scan.payloads.size() && !scan.damaged_tail) return dropped;
  AtomicFileWriter writer(file, temp_path(file.parent_path()));
  writer.write(kept.data(), kept.size());
  writer.commit();
  dropped.changed = true;
  return dropped;
}

size_t TensorBoardLog::drop_events_after(const std::filesystem::path& folder, int64_t last_step,
                                         const std::filesystem::path& keep_dropped_in) {
  if (!std::filesystem::is_directory(folder)) return 0;
  remove_dead_temps(folder, [](std::string_view base) { return base == kTempBase; });
  std::vector<std::filesystem::path> ours;  // listed first: rewriting adds and renames files
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    if (entry.is_regular_file() && is_ours(entry.path())) ours.push_back(entry.path());
  std::sort(ours.begin(), ours.end());
  size_t events = 0, files = 0;
  for (const std::filesystem::path& path : ours) {
    const Dropped dropped = drop_after(path, last_step, keep_dropped_in);
    events += dropped.events;
    files += dropped.changed;
  }
  if (!keep_dropped_in.empty() && events > 0)
    log::info("train", "{}: the {} event(s) after step {} are moved to {}", folder.string(), events,
              last_step, keep_dropped_in.string());
  else if (last_step == 0 && events > 0)
    log::warn("train",
              "{}: this run starts at step 0, so the {} event(s) that earlier runs "
              "wrote are dropped (no checkpoint was resumed: --resume none, or none in the run "
              "folder)",
              folder.string(), events);
  else if (files > 0)
    log::info("train", "{}: dropped the {} event(s) after step {} from {} earlier file(s)",
              folder.string(), events, last_step, files);
  return events;
}

TensorBoardLog TensorBoardLog::append_to(const std::filesystem::path& file) {
  return TensorBoardLog(file);
}

TensorBoardLog::TensorBoardLog(const std::filesystem::path& file) : out_(file) {
  append({now_seconds(), 0, "brain.Event:2", {}});
}

TensorBoardLog::TensorBoardLog(const std::filesystem::path& folder, int64_t first_step)
    : TensorBoardLog(start_in(folder, first_step)) {}

void TensorBoardLog::write(const nlohmann::ordered_json& record) {
  int64_t step = 0;
  std::vector<event_file::Scalar> scalars = TensorBoardLog::scalars(record, &step);
  if (!scalars.empty()) append({now_seconds(), step, "", std::move(scalars)});
}

void TensorBoardLog::append(const event_file::Event& event) {
  out_.append(event_file::frame_record(event_file::encode_event(event)));
}

}  // namespace nmt::train
