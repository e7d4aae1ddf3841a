#include "train/monitor_file.h"

#include <cerrno>
#include <cstring>

#include "util/error.h"
#include "util/log.h"

namespace nmt::train {

MonitorFile::MonitorFile(std::filesystem::path file) : file_(std::move(file)) {
  out_.open(file_, std::ios::binary | std::ios::app);
  NMT_CHECK(out_.good(), Error, "{}: cannot open for appending: {}", file_.string(),
            std::strerror(errno));
}

MonitorFile::~MonitorFile() {
  if (lost_ > 0)
    log::warn("train",
              "{}: {} record(s) of this run were not written (a write failed: see the "
              "warning at the first)",
              file_.string(), lost_);
}

bool MonitorFile::append(std::string_view bytes) {
  if (failed_) {
    ++lost_;
    return false;
  }
  errno = 0;
  out_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out_.flush();
  if (out_.good()) return true;
  const int error = errno;
  failed_ = true;
  lost_ = 1;
  log::warn("train",
            "{}: write failed: {}; training continues, but this file gets no more "
            "records in this run",
            file_.string(), error != 0 ? std::strerror(error) : "unknown error");
  return false;
}

}  // namespace nmt::train
