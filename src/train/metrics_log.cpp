#include "train/metrics_log.h"

#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace nmt::train {

MetricsLog::MetricsLog(const std::filesystem::path& file, bool enabled, bool tensorboard,
                       int64_t first_step) {
  if (!enabled) return;
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  out_.open(file, std::ios::app);
  NMT_CHECK(out_.good(), Error, "{}: cannot open for appending: {}", file.string(),
            std::strerror(errno));
  if (tensorboard) tensorboard_.emplace(file.parent_path() / "tensorboard", first_step);
}

void MetricsLog::write(const json::Object& record) {
  if (out_.is_open()) out_ << record.str() << '\n' << std::flush;
  if (tensorboard_) tensorboard_->write(record);
}

}  // namespace nmt::train
