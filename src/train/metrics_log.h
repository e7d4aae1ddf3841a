#pragma once
// metrics.jsonl: one JSON object per line, per log step and per validation, appended and
// flushed as it happens so a crash loses nothing already reported.

#include <filesystem>
#include <fstream>

#include "util/json.h"

namespace nmt::train {

/// Appends JSON records to a file (on the rank that writes it).
class MetricsLog {
 public:
  /// Opens file for appending when enabled (creating its folder); otherwise writes nothing.
  MetricsLog(const std::filesystem::path& file, bool enabled);
  /// Writes one record as one line.
  void write(const json::Object& record);

 private:
  std::ofstream out_;
};

}  // namespace nmt::train
