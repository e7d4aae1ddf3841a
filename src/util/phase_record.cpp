#include "util/phase_record.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "util/json_text.h"
#include "util/log.h"

namespace nmt {

std::filesystem::path phase_record_file(const std::filesystem::path& run_dir) {
  return run_dir / "phases.jsonl";
}

void record_phase(const std::filesystem::path& run_dir, const std::string& phase, double seconds,
                  const nlohmann::ordered_json& extra) {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);  // ru_maxrss: kilobytes on Linux
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::ordered_json record;
  record["phase"] = phase;
  record["pid"] = static_cast<int64_t>(::getpid());
  record["end_unix"] = now;
  record["seconds"] = seconds;
  record["max_rss_mb"] = double(usage.ru_maxrss) / 1024.0;
  for (const auto& [key, value] : extra.items()) record[key] = value;
  const std::string text = json::line(record) + "\n";
  const std::filesystem::path file = phase_record_file(run_dir);
  std::error_code ignored;
  std::filesystem::create_directories(run_dir, ignored);
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0666);
  const bool written =
      fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int error = errno;
  if (fd >= 0) ::close(fd);
  if (!written)
    log::warn("run", "{}: could not record phase {}: {}", file.string(), phase,
              std::strerror(error));
}

}  // namespace nmt
