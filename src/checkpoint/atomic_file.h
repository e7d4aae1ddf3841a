#pragma once
// Atomic file replacement: write "<target>.tmp-<pid>" in the target's folder, fsync it, rename
// it over the target, fsync the folder. A reader (or a crash, or a full disk) therefore sees
// either the old file or the complete new one, never a mix.

#include <cstddef>
#include <filesystem>
#include <string_view>
#include <vector>

namespace nmt::checkpoint {

/// "<target>.tmp-<pid>": where AtomicFileWriter writes before renaming.
std::filesystem::path temp_path_for(const std::filesystem::path& target);
/// True for names made by temp_path_for (of any process): leftovers of a crashed writer.
bool is_temp_file_name(std::string_view file_name);

/// Writes a file atomically. Every failure throws CheckpointError naming the target, the step
/// that failed and the errno text, and removes the temp file, so the target keeps its old
/// contents. Without commit() (e.g. an exception in the caller) the destructor removes the
/// temp file and the target is untouched.
class AtomicFileWriter {
 public:
  /// Creates the temp file next to target (its folder must exist).
  explicit AtomicFileWriter(std::filesystem::path target);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  /// Appends bytes. Small pieces are gathered in a buffer; large ones are written directly
  /// from the caller's memory, without a copy.
  void write(const void* data, size_t size);
  /// Flushes, fsyncs and closes the temp file, renames it over the target, fsyncs the folder.
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

}  // namespace nmt::checkpoint
