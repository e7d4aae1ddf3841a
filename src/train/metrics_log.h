#pragma once
// metrics.jsonl: one JSON object per line, per log step and per validation, appended and
// flushed as it happens so a crash loses nothing already reported.

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace nmt::train {

/// Appends JSON records to a file (on the rank that writes it).
class MetricsLog {
 public:
  /// Opens file for appending when enabled (creating its folder); otherwise writes nothing.
  MetricsLog(const std::filesystem::path& file, bool enabled);
  /// Writes one record of (key, JSON value text) fields, e.g. {"loss", "2.5"}, {"type", "\"train\""}.
  void write(const std::vector<std::pair<std::string, std::string>>& fields);

 private:
  std::ofstream out_;
};

}  // namespace nmt::train
