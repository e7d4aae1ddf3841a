#include "train/metrics_log.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_text.h"
#include "util/log.h"

namespace nmt::train {
namespace {

/// The integer value of `"step"` among the top-level members of a JSON line, as MetricsLog
/// writes them; nullopt when there is none, when it is not an integer, or when the line is not
/// a JSON object.
std::optional<int64_t> top_level_step(std::string_view line) {
  const auto record = nlohmann::ordered_json::parse(line.begin(), line.end(), nullptr, false);
  if (!record.is_object()) return std::nullopt;  // a parse error gives a discarded value
  const auto step = record.find("step");
  if (step == record.end() || !step->is_number_integer()) return std::nullopt;
  return step->get<int64_t>();
}

}  // namespace

size_t MetricsLog::drop_after(const std::filesystem::path& file, int64_t last_step,
                              const std::filesystem::path& keep_dropped_in) {
  std::ifstream in(file, std::ios::binary);
  NMT_CHECK(in.good(), Error, "{}: cannot read: {}", file.string(), std::strerror(errno));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string kept, later;
  size_t dropped = 0;
  for (size_t begin = 0; begin < text.size();) {
    const size_t end = text.find('\n', begin);
    if (end == std::string::npos) {  // unterminated: a write that a crash cut short
      ++dropped;
      break;
    }
    const std::string_view line(text.data() + begin, end - begin);
    const auto step = top_level_step(line);
    if (step && *step > last_step) {
      ++dropped;
      later.append(line).push_back('\n');
    } else {
      kept.append(line).push_back('\n');
    }
    begin = end + 1;
  }
  if (dropped == 0) return 0;
  // The set-aside copy first: a crash between the two writes leaves a record twice, never
  // nowhere.
  if (!keep_dropped_in.empty() && !later.empty()) {
    std::filesystem::create_directories(keep_dropped_in);
    write_file_atomically(keep_dropped_in / file.filename(), later);
  }
  AtomicFileWriter writer(file);
  writer.write(kept.data(), kept.size());
  writer.commit();
  return dropped;
}

void set_aside_records_after(const std::filesystem::path& run_dir, int64_t step,
                             const std::filesystem::path& folder) {
  const std::filesystem::path metrics = run_dir / kMetricsFileName;
  if (std::filesystem::is_regular_file(metrics)) {
    const size_t moved = MetricsLog::drop_after(metrics, step, folder);
    if (moved > 0)
      log::info("train", "{}: the {} record(s) after step {} are moved to {}", metrics.string(),
                moved, step, (folder / kMetricsFileName).string());
  }
  TensorBoardLog::drop_events_after(run_dir / "tensorboard", step, folder / "tensorboard");
}

MetricsLog::MetricsLog(const std::filesystem::path& file, bool enabled, bool tensorboard,
                       int64_t first_step) {
  if (!enabled) return;
  const std::filesystem::path folder = file.parent_path();
  if (!folder.empty()) std::filesystem::create_directories(folder);
  const std::string name = file.filename().string();
  remove_dead_temps(folder.empty() ? "." : folder,
                                [&](std::string_view base) { return base == name; });
  if (std::filesystem::is_regular_file(file)) {
    const size_t dropped = drop_after(file, first_step);
    if (dropped > 0 && first_step == 0)
      log::warn("train",
                "{}: this run starts at step 0, so the {} record(s) that earlier runs "
                "wrote are dropped (no checkpoint was resumed: --resume none, or none in the run "
                "folder)",
                file.string(), dropped);
    else if (dropped > 0)
      log::info("train",
                "{}: dropped {} line(s) that an earlier run wrote after step {} or cut "
                "short",
                file.string(), dropped, first_step);
  }
  out_.emplace(file);
  const std::filesystem::path events = folder / "tensorboard";
  if (tensorboard)
    tensorboard_.emplace(events, first_step);
  else
    TensorBoardLog::drop_events_after(events, first_step);
}

void MetricsLog::write(const nlohmann::ordered_json& record) {
  if (out_) out_->append(json::line(record) + "\n");
  if (tensorboard_) tensorboard_->write(record);
}

}  // namespace nmt::train
