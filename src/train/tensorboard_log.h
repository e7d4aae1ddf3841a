#pragma once
// TensorBoard scalars of the records metrics.jsonl gets (log.tensorboard): every number of a
// record becomes a scalar at the record's step, so a metric added to a record shows up in
// TensorBoard without code here. Tags: the record's "type", its validation "set" when it has
// one, then the member's path (nested objects and arrays flattened):
//   {"type": "train", "step": 8, "loss": 5.1}               ->  train/loss
//   {"type": "valid", "set": "dev", "step": 8, "bleu": 3.2}  ->  valid/dev/bleu
// "step" is the step itself; strings, booleans and null (a non-finite number) are left out.
//
// Files: <run_dir>/tensorboard/events.out.tfevents.<seconds>.<host>.<pid>.nmt-train, a new one
// per run (TensorBoard reads them all, in name order). The ".nmt-train" ending marks the files
// of this run family: the only ones a run reads, rewrites or removes. Other tools' files in the
// folder (any name, any content) are never touched.
//
// A run that starts from a step (its checkpoint's, or 0) continues from there, so events of
// later steps, written before a crash or by a run whose last checkpoint was lost, would repeat:
// at the start, with log.tensorboard on or off, they are dropped from our files (each rewritten
// atomically, through a temp file "nmt-train-rewrite.tmp-<pid>", a name TensorBoard's loader,
// which reads every file whose name holds "tfevents", does not pick up), and a file with no
// scalars left is removed. So no step appears twice, and no undone step stays. A start at step
// 0 drops everything: said as a warning with the number of events. Temp files of a rewrite
// whose process is gone are removed; others stay. metrics.jsonl drops its records alike
// (metrics_log.h). A write that fails during the run follows train/monitor_file.h.

#include <cstdint>
#include <filesystem>
#include <vector>

#include <nlohmann/json_fwd.hpp>  // json.hpp in sources only: ~1-2 s each
#include "train/monitor_file.h"
#include "util/event_file.h"

namespace nmt::train {

/// Writes metrics records as TensorBoard scalar events (on the rank that writes metrics).
class TensorBoardLog {
 public:
  /// Drops the later events from folder (drop_events_after), then opens a new events file
  /// there (the folder created when missing) and writes its first event.
  TensorBoardLog(const std::filesystem::path& folder, int64_t first_step);
  /// Appends to exactly this file, with no folder handling: for tools and tests.
  static TensorBoardLog append_to(const std::filesystem::path& file);
  /// Writes a record's numbers as one event at its "step" (a record without one is ignored),
  /// with the current time as its wall time, and flushes it.
  void write(const nlohmann::ordered_json& record);
  /// Path of the file this run writes.
  const std::filesystem::path& file() const { return out_.path(); }

  /// The scalars of a record, tagged as the header says; its step goes to *step (none when
  /// the record has no step).
  static std::vector<event_file::Scalar> scalars(const nlohmann::ordered_json& record,
                                                 int64_t* step);
  /// Whether a file name is one of ours ("events.out.tfevents.*.nmt-train").
  static bool is_ours(const std::filesystem::path& file);
  /// The temp file of a rewrite in folder by this process (its name holds no "tfevents").
  static std::filesystem::path temp_path(const std::filesystem::path& folder);

  /// What drop_after did to a file.
  struct Dropped {
    size_t events = 0;     ///< scalar events dropped
    bool changed = false;  ///< the file was rewritten or removed
  };
  /// Drops the events of steps after last_step from an events file, and a cut or corrupt tail
  /// record; rewrites it atomically when that changes it, removes it when no scalars remain
  /// (or there were none). Only for our files: it takes whatever file it is given. With
  /// keep_dropped_in, the dropped events (after the file's events without scalars) are first
  /// written to a file of the same name in that folder (created when missing).
  static Dropped drop_after(const std::filesystem::path& file, int64_t last_step,
                            const std::filesystem::path& keep_dropped_in = {});
  /// What a run does to folder at its start: removes the temp files of our rewrites whose
  /// process is gone, and drops the events after last_step from each of our files (info; a
  /// warning naming the count when last_step is 0). A missing folder is left missing.
  /// Returns the number of scalar events dropped. With keep_dropped_in, each file's dropped
  /// events are kept there (drop_after).
  static size_t drop_events_after(const std::filesystem::path& folder, int64_t last_step,
                                  const std::filesystem::path& keep_dropped_in = {});

 private:
  explicit TensorBoardLog(const std::filesystem::path& file);
  void append(const event_file::Event& event);

  MonitorFile out_;
};

}  // namespace nmt::train
