#include "dist/worker_output.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>

#include <fmt/format.h>

namespace nmt::dist {
namespace {

/// A worker line longer than this is passed on in pieces, so one endless line cannot
/// exhaust the launcher's memory.
constexpr size_t kMaxLine = 64 * 1024;

void emit_line(Worker& w, Stream& s, std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (!line.empty()) w.last_line = std::string(line);
  // One write per line, so lines of different workers never interleave mid-line.
  write_all(s.target, fmt::format("[rank {}] {}\n", w.rank, line));
}

}  // namespace

void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<size_t>(n));
  }
}

std::string last_line_of(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - 8192);
  std::string tail(static_cast<size_t>(size - start), '\0');
  in.seekg(start);
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
  const size_t newline = tail.rfind('\n');
  return newline == std::string::npos ? tail : tail.substr(newline + 1);
}

void pump(Worker& w, Stream& s) {
  char buffer[16384];
  while (s.pipe.get() >= 0) {
    const ssize_t n = ::read(s.pipe.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // EAGAIN: nothing more for now
    if (n == 0) {
      if (!s.partial.empty()) emit_line(w, s, s.partial);
      s.partial.clear();
      s.pipe.reset();
      return;
    }
    s.partial.append(buffer, static_cast<size_t>(n));
    size_t start = 0, newline;
    while ((newline = s.partial.find('\n', start)) != std::string::npos) {
      emit_line(w, s, std::string_view(s.partial).substr(start, newline - start));
      start = newline + 1;
    }
    s.partial.erase(0, start);
    if (s.partial.size() >= kMaxLine) {
      emit_line(w, s, s.partial);
      s.partial.clear();
    }
  }
}

void finish(Worker& w, Stream& s) {
  pump(w, s);
  if (!s.partial.empty()) emit_line(w, s, s.partial);
  s.partial.clear();
  s.pipe.reset();
}

}  // namespace nmt::dist
