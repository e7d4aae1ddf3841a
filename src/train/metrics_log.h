#pragma once
// metrics.jsonl: one JSON object per line, per log step and per validation, appended and
// flushed as it happens so a crash loses nothing already reported. A run that starts from a
// step (its checkpoint's, or 0) drops the records of later steps first, and a last line that a
// crash cut short (what a crashed run logged after its last checkpoint is logged again), so no
// step appears twice: rewritten atomically, keeping the file's permissions. Dropping records
// after a resumed checkpoint is routine (info); a start at step 0 drops them all, which is said
// as a warning with their number. Temp files of such rewrites ("metrics.jsonl.tmp-<pid>") whose
// process is gone are removed. The TensorBoard events in <file's folder>/tensorboard/ drop
// their later events at the same time, whether or not this run writes events (with
// log.tensorboard it does: tensorboard_log.h). A run that replaces another sets the later
// records aside with that run's checkpoints first (set_aside_records_after). A write that fails during the run follows
// train/monitor_file.h: one warning, and training goes on.

#include <cstdint>
#include <filesystem>
#include <optional>

#include <nlohmann/json_fwd.hpp>  // json.hpp in sources only: ~1-2 s each
#include "train/monitor_file.h"
#include "train/tensorboard_log.h"

namespace nmt::train {

/// The metrics file's name in a run directory.
inline constexpr const char* kMetricsFileName = "metrics.jsonl";

/// Appends JSON records to a file (on the rank that writes it).
class MetricsLog {
 public:
  /// When enabled: creates file's folder, drops what earlier runs wrote after first_step (the
  /// step this run starts from) from file and from <file's folder>/tensorboard/, and opens file
  /// for appending; with tensorboard, also opens a new events file there. Otherwise writes
  /// nothing and touches nothing.
  MetricsLog(const std::filesystem::path& file, bool enabled, bool tensorboard = false,
             int64_t first_step = 0);
  /// Writes one record as one line (and as TensorBoard scalars); a failed write is one warning
  /// (monitor_file.h), not an error.
  void write(const nlohmann::ordered_json& record);

  /// Rewrites file (atomically, keeping its permissions) without its records of a step after
  /// last_step and without an unterminated last line; returns how many lines it dropped (0:
  /// the file is untouched). Lines without a top-level integer "step" stay. With
  /// keep_dropped_in, the dropped records (not a cut-short line) are first written to a file
  /// of the same name in that folder (created when missing).
  static size_t drop_after(const std::filesystem::path& file, int64_t last_step,
                           const std::filesystem::path& keep_dropped_in = {});

 private:
  std::optional<MonitorFile> out_;
  std::optional<TensorBoardLog> tensorboard_;
};

/// What a run that replaces another from `step` does with that run's records when its later
/// checkpoints are set aside into `folder` (checkpoints/superseded-<time>/): the records of
/// later steps of <run_dir>/metrics.jsonl and of our TensorBoard files in
/// <run_dir>/tensorboard/ move to <folder>/metrics.jsonl and <folder>/tensorboard/, so the
/// set-aside checkpoints keep their curves. What is left to drop at the run's start is then
/// only what a crash left after its last checkpoint.
void set_aside_records_after(const std::filesystem::path& run_dir, int64_t step,
                             const std::filesystem::path& folder);

}  // namespace nmt::train
