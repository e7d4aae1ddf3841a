#include "util/run_dir_lock.h"

#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <string>

#include <fmt/format.h>

#include "util/error.h"
#include "util/host_name.h"
#include "util/log.h"

namespace nmt {
namespace {

/// "host H, pid P, since T": what the holder wrote into the file.
std::string holder_text(int fd) {
  char buffer[512];
  const ssize_t n = ::pread(fd, buffer, sizeof(buffer) - 1, 0);
  if (n <= 0) return "a process that has not written its name yet";
  std::string text(buffer, static_cast<size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string this_holder() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  return fmt::format("host {}, pid {}, since {:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC\n",
                     host_name().value_or("(unnamed host)"), static_cast<long>(::getpid()),
                     utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min,
                     utc.tm_sec);
}

}  // namespace

RunDirLock RunDirLock::acquire(const std::filesystem::path& run_dir) {
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  NMT_CHECK(!ec, ConfigError, "{}: cannot create the run directory: {}", run_dir.string(),
            ec.message());
  const std::filesystem::path file = run_dir / kRunDirLockName;
  FileLock lock = [&file] {
    try {
      return FileLock::try_lock(file);
    } catch (const Error& e) {
      throw ConfigError(e.what(), e.where());
    }
  }();
  switch (lock.state()) {
    case FileLock::State::kUnsupported:
      log::warn("run",
                "{}: the file system does not lock files ({}): a second run on this "
                "directory would not be refused",
                file.string(), std::strerror(lock.error()));
      break;
    case FileLock::State::kBusy:
      NMT_THROW(ConfigError,
                "{}: the run directory is in use by another nmt-train ({}; lock file {}): wait "
                "for it to end, or give this run another run_dir",
                run_dir.string(), holder_text(lock.fd()), file.string());
    case FileLock::State::kHeld: {
      // Best effort: the text is for people; the kernel's lock is what counts.
      const std::string text = this_holder();
      if (::ftruncate(lock.fd(), 0) == 0) {
        const ssize_t written = ::pwrite(lock.fd(), text.data(), text.size(), 0);
        (void)written;
      }
      break;
    }
  }
  return RunDirLock(std::move(lock));
}

std::optional<std::string> RunDirLock::holder(const std::filesystem::path& run_dir) {
  const std::filesystem::path file = run_dir / kRunDirLockName;
  if (!std::filesystem::exists(file)) return std::nullopt;
  const FileLock probe = FileLock::try_lock(file);
  if (probe.state() != FileLock::State::kBusy) return std::nullopt;  // taken and let go at once
  return holder_text(probe.fd());
}

}  // namespace nmt
