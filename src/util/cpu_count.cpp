#include "util/cpu_count.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace nmt {
namespace {

std::optional<std::string> read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<double> positive_ratio(double quota, double period) {
  if (!(quota > 0) || !(period > 0)) return std::nullopt;
  return quota / period;
}

/// The smallest CFS quota, in CPUs, of this process's cgroup and its ancestors.
std::optional<double> cgroup_quota() {
  std::optional<double> quota;
  const auto take = [&quota](std::optional<double> q) {
    if (q) quota = quota ? std::min(*quota, *q) : *q;
  };
  const std::filesystem::path root = "/sys/fs/cgroup";
  // v2: one "0::<path>" line; the limit may sit on any ancestor.
  if (const auto cgroups = read_text("/proc/self/cgroup")) {
    std::istringstream lines(*cgroups);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("0::", 0) != 0) continue;
      std::filesystem::path dir = root / std::filesystem::path(line.substr(3)).relative_path();
      for (;; dir = dir.parent_path()) {
        if (const auto text = read_text(dir / "cpu.max")) take(cpu_max_quota(*text));
        if (dir == root || !dir.has_relative_path() || dir.parent_path() == dir) break;
      }
    }
  }
  // v1: the container's view of its own cpu controller.
  for (const char* cpu : {"cpu", "cpu,cpuacct"}) {
    const auto q = read_text(root / cpu / "cpu.cfs_quota_us");
    const auto p = read_text(root / cpu / "cpu.cfs_period_us");
    if (q && p) {
      try {
        take(positive_ratio(std::stod(*q), std::stod(*p)));
      } catch (const std::exception&) {
      }
    }
  }
  return quota;
}

}  // namespace

std::optional<double> cpu_max_quota(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || quota == "max") return std::nullopt;
  try {
    size_t used = 0;
    const double value = std::stod(quota, &used);
    if (used != quota.size()) return std::nullopt;
    return positive_ratio(value, period);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

int usable_cpus() {
  int cpus = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) cpus = CPU_COUNT(&set);
  if (const auto quota = cgroup_quota())
    cpus = std::min(cpus, static_cast<int>(std::ceil(*quota - 1e-9)));
  return std::max(1, cpus);
}

}  // namespace nmt
