#pragma once
// The one rule for a run's monitoring files (metrics.jsonl and its TensorBoard events file),
// so that the two fail alike:
//   - opening one at the start fails with an Error naming it: the run stops before training,
//     when fixing the folder costs nothing;
//   - a write that fails during the run (a full disk, a lost NFS mount) logs one warning naming
//     the file and the error, and training continues; that file gets no further writes in this
//     run, and when the run ends a second warning says how many records it lost.
// Why not stop: on a multi-day job the checkpoints are what must not be lost, and their writes
// stop the run on failure anyway (util/atomic_file.h); killing days of training because a
// log file could not be appended to trades the run for its monitoring. Why no further writes:
// a record cut short followed by whole ones would be damage in the middle of the file, where
// neither TensorBoard's reader (it stops at the first bad record) nor a resume's cleanup (it
// drops a cut last record) gets past it; stopping there leaves a cut tail only.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string_view>

namespace nmt::train {

/// An append-only monitoring file with the rule above.
class MonitorFile {
 public:
  /// Opens file for appending (binary, created when missing); an Error naming it on failure.
  explicit MonitorFile(std::filesystem::path file);
  /// Warns how many records were not written, when a write failed.
  ~MonitorFile();
  MonitorFile(const MonitorFile&) = delete;
  MonitorFile& operator=(const MonitorFile&) = delete;

  /// Appends one record's bytes and flushes them; false (and nothing written) once a write
  /// has failed, the first failure logging the warning.
  bool append(std::string_view bytes);
  /// Whether a write failed (the file gets no more records).
  bool failed() const { return failed_; }
  /// The file.
  const std::filesystem::path& path() const { return file_; }

 private:
  std::filesystem::path file_;
  std::ofstream out_;
  bool failed_ = false;
  int64_t lost_ = 0;  ///< records not written, the failed one included
};

}  // namespace nmt::train
