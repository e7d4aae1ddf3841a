#pragma once
// TensorBoard scalars of the records metrics.jsonl gets (log.tensorboard): every number of a
// record becomes a scalar at the record's step, so a metric added to a record shows up in
// TensorBoard without code here. Tags: the record's "type", its validation "set" when it has
// one, then the member's path (nested objects and arrays flattened):
//   {"type": "train", "step": 8, "loss": 5.1}               ->  train/loss
//   {"type": "valid", "set": "dev", "step": 8, "bleu": 3.2}  ->  valid/dev/bleu
// "step" is the step itself; strings, booleans and null (a non-finite number) are left out.
//
// Files: <run_dir>/tensorboard/events.out.tfevents.<seconds>.<host>.<pid>, a new one per run
// (TensorBoard reads them all, in name order). A resumed run continues from its checkpoint, so
// events of later steps, written before a crash or by a run whose last checkpoint was lost,
// would repeat: opening drops them from the older files first (each rewritten atomically), so
// no step appears twice. metrics.jsonl keeps every line it was given, repeats included.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include "util/event_file.h"
#include "util/json.h"

namespace nmt::train {

/// Writes metrics records as TensorBoard scalar events (on the rank that writes metrics).
class TensorBoardLog {
 public:
  /// Opens a new events file in folder (created when missing), after dropping from the files
  /// already there every event of a step after first_step, the step this run starts from.
  TensorBoardLog(const std::filesystem::path& folder, int64_t first_step);
  /// Writes a record's numbers as one event at its "step" (a record without one is ignored),
  /// with the current time as its wall time, and flushes it.
  void write(const json::Object& record);
  /// Path of the file this run writes.
  const std::filesystem::path& file() const { return file_; }

  /// The scalars of a record, tagged as the header says; its step goes to *step (none when
  /// the record has no step).
  static std::vector<event_file::Scalar> scalars(const json::Object& record, int64_t* step);
  /// Drops the events of steps after last_step from an events file, and a cut or corrupt tail
  /// record; rewrites it atomically when that changes it, removes it when no scalars remain
  /// (or there were none).
  /// Returns whether it changed the file.
  static bool drop_after(const std::filesystem::path& file, int64_t last_step);

 private:
  void append(const event_file::Event& event);

  std::filesystem::path file_;
  std::ofstream out_;
};

}  // namespace nmt::train
