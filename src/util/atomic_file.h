#pragma once
// Atomic file replacement: write "<target>.tmp-<pid>" (or a temp name the caller picks) in the
// target's folder, fsync it, rename it over the target, fsync the folder. A reader (or a crash,
// or a full disk) therefore sees either the old file or the complete new one, never a mix. A
// replaced file keeps its permission bits. Checkpoints, metrics files and TensorBoard events
// all write through it, so it lives in util/ (failures are CheckpointError).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

namespace nmt {

/// "<target>.tmp-<pid>": where AtomicFileWriter writes before renaming; beside the folder for
/// a target with a trailing separator ("out/" -> "out.tmp-<pid>").
std::filesystem::path temp_path_for(const std::filesystem::path& target);
/// True for names made by temp_path_for (of any process): leftovers of a crashed writer.
bool is_temp_file_name(std::string_view file_name);
/// The pid of a "<base>.tmp-<pid>" name (nullopt for other names).
std::optional<int64_t> temp_file_pid(std::string_view file_name);
/// True when a process of this pid, other than this one, runs on this host (kill(pid, 0): EPERM
/// is another user's live process): the test of whether a temp file's writer is gone.
bool other_process_alive(int64_t pid);
/// Removes the files of folder named "<base>.tmp-<pid>" whose base passes is_ours and whose
/// writer is gone: no process of that pid runs on this host, or it is this process (call it
/// before this process writes such a file). A temp of a live process, or one is_ours rejects,
/// stays. A pid is only checked on this host: a run folder shared by hosts must not be written
/// by two of them at once. Returns the paths removed.
std::vector<std::filesystem::path> remove_dead_temps(
    const std::filesystem::path& folder, const std::function<bool(std::string_view base)>& is_ours);

/// Writes `contents` to `target` through an AtomicFileWriter: a file that cannot be written
/// (a missing folder, a full disk) is a CheckpointError naming it, never a silent success.
void write_file_atomically(const std::filesystem::path& target, std::string_view contents);

/// Writes a file atomically. Every failure throws CheckpointError naming the target, the step
/// that failed and the errno text, and removes the temp file, so the target keeps its old
/// contents. Without commit() (e.g. an exception in the caller) the destructor removes the
/// temp file and the target is untouched.
class AtomicFileWriter {
 public:
  /// Creates the temp file "<target>.tmp-<pid>" next to target (its folder must exist).
  explicit AtomicFileWriter(std::filesystem::path target);
  /// Creates the temp file at temp, which must be in target's folder (a rename does not cross
  /// filesystems): for targets whose temp must not look like one (TensorBoard reads every file
  /// whose name holds "tfevents").
  AtomicFileWriter(std::filesystem::path target, std::filesystem::path temp);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  /// Appends bytes. Small pieces are gathered in a buffer; large ones are written directly
  /// from the caller's memory, without a copy.
  void write(const void* data, size_t size);
  /// Flushes, fsyncs and closes the temp file, renames it over the target, fsyncs the folder.
  /// A target that existed when the writer was made keeps its permission bits.
  void commit();

 private:
  [[noreturn]] void fail(std::string_view step, int error);
  void flush_buffer();
  void write_fully(const void* data, size_t size);

  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;
  bool committed_ = false;
  std::vector<char> buffer_;
};

}  // namespace nmt
