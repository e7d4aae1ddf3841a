#pragma once
// The launcher's workers and their output: each worker's stdout and stderr are pipes that the
// launcher reads without blocking and passes on line by line, prefixed "[rank R] " (whole
// lines, never interleaved mid-line). Torch-free, like the rest of the launcher (launcher.h).

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>

#include "dist/unique_fd.h"

namespace nmt::dist {

/// One output stream of a worker: a pipe read line by line and copied to our fd `target`.
struct Stream {
  UniqueFd pipe;        ///< read end, non-blocking; -1 after EOF
  int target = 1;       ///< our stdout or stderr
  std::string partial;  ///< the start of a line not yet ended
};

/// A worker process of the current attempt.
struct Worker {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;  ///< waitpid status once exited
  Stream out, err;
  std::string last_line;  ///< last non-empty line on either stream
};

/// Writes all of text to fd; output to a closed stdout is dropped.
void write_all(int fd, std::string_view text);

/// Reads what the pipe holds now and passes on the complete lines; at EOF also the rest. A line
/// longer than 64 KiB is passed on in pieces, so one endless line cannot exhaust our memory.
void pump(Worker& w, Stream& s);

/// Passes on whatever is left and closes the pipe (a worker's children may still hold it).
void finish(Worker& w, Stream& s);

/// The last non-empty line of a text file (read from its end), or "" when there is none.
std::string last_line_of(const std::filesystem::path& file);

}  // namespace nmt::dist
