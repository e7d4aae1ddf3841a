#pragma once
// metrics.jsonl: one JSON object per line, per log step and per validation, appended and
// flushed as it happens so a crash loses nothing already reported. A run that starts from a
// step drops the records of later steps first (what a crashed run logged after its last
// checkpoint is logged again), so no step appears twice. With log.tensorboard the same
// records also go to TensorBoard event files (tensorboard_log.h), which drop likewise.

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
  /// Records already there of a step after first_step (the step this run starts from), and
  /// a last line that a crash cut short, are dropped first. With tensorboard, also writes
  /// each record to <file's folder>/tensorboard/, dropping what earlier runs wrote there
  /// after first_step.
  MetricsLog(const std::filesystem::path& file, bool enabled, bool tensorboard = false,
             int64_t first_step = 0);
  /// Writes one record as one line (and as TensorBoard scalars); a failed write is an Error
  /// naming the file, as it is for the TensorBoard files.
  void write(const json::Object& record);

  /// Rewrites file (atomically) without its records of a step after last_step and without
  /// an unterminated last line; false when nothing had to go. Lines without a top-level
  /// integer "step" stay.
  static bool drop_after(const std::filesystem::path& file, int64_t last_step);

 private:
  std::filesystem::path file_;
  std::ofstream out_;
  std::optional<TensorBoardLog> tensorboard_;
};

}  // namespace nmt::train
