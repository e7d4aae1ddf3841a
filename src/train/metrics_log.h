#pragma once
// metrics.jsonl: one JSON object per line, per log step and per validation, appended and
// flushed as it happens so a crash loses nothing already reported. With log.tensorboard the
// same records also go to TensorBoard event files (tensorboard_log.h).

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>

#include "train/tensorboard_log.h"
#include "util/json.h"

namespace nmt::train {

/// Appends JSON records to a file (on the rank that writes it).
class MetricsLog {
 public:
  /// Opens file for appending when enabled (creating its folder); otherwise writes nothing.
  /// With tensorboard, also writes each record to <file's folder>/tensorboard/, dropping what
  /// earlier runs wrote there after first_step (the step this run starts from).
  MetricsLog(const std::filesystem::path& file, bool enabled, bool tensorboard = false,
             int64_t first_step = 0);
  /// Writes one record as one line (and as TensorBoard scalars).
  void write(const json::Object& record);

 private:
  std::ofstream out_;
  std::optional<TensorBoardLog> tensorboard_;
};

}  // namespace nmt::train
