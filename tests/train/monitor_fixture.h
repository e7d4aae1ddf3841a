#pragma once
// Helpers of the tests of the monitoring files (metrics.jsonl, TensorBoard events): what a
// block of code logs, and the pid of a process that has ended.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "test_support.h"
#include "util/log.h"

namespace nmt::test {

/// The pid of a child that has exited and been reaped: no process has it (until the kernel
/// hands it out again, which takes a full turn of the pid space).
inline int64_t dead_pid() {
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error("dead_pid: fork failed");
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

/// While one lives, every message also goes to a file in a temp folder (from construction to
/// text() or destruction; then logging is as the tests set it).
class LogCapture {
 public:
  LogCapture() {
    log::init(log::LogOptions{});
    log::add_file_sink(file_);
  }
  ~LogCapture() { text(); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  /// Ends the capture and returns what was logged since it began.
  std::string text() {
    if (!done_) {
      log::shutdown();  // flushes the file
      log::init(log::LogOptions{});
      done_ = true;
    }
    return read_file(file_);
  }
  /// Ends the capture and returns how often needle occurs in what was logged.
  size_t count(const std::string& needle) {
    const std::string all = text();
    size_t n = 0;
    for (size_t at = all.find(needle); at != std::string::npos; at = all.find(needle, at + 1)) ++n;
    return n;
  }

 private:
  TempDir dir_;
  std::filesystem::path file_ = dir_.path() / "log.txt";
  bool done_ = false;
};

}  // namespace nmt::test
