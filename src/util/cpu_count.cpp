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

/// The CPUs of this process's cgroup cpuset, or nullopt when none is found.
std::optional<int> cgroup_cpuset() {
  const std::filesystem::path root = "/sys/fs/cgroup";
  if (const auto cgroups = read_text("/proc/self/cgroup")) {
    std::istringstream lines(*cgroups);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("0::", 0) != 0) continue;
      const std::filesystem::path dir =
          root / std::filesystem::path(line.substr(3)).relative_path();
      if (const auto text = read_text(dir / "cpuset.cpus.effective"))
        if (const int n = cpu_list_count(*text); n > 0) return n;
    }
  }
  if (const auto text = read_text(root / "cpuset" / "cpuset.cpus"))
    if (const int n = cpu_list_count(*text); n > 0) return n;
  return std::nullopt;
}

int affinity_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

}  // namespace

int cpu_list_count(std::string_view text) {
  std::istringstream in{std::string(text)};
  int count = 0;
  for (std::string range; std::getline(in, range, ',');) {
    while (!range.empty() && (range.back() == '\n' || range.back() == ' ')) range.pop_back();
    if (range.empty()) continue;
    try {
      size_t used = 0;
      const int first = std::stoi(range, &used);
      int last = first;
      if (used < range.size()) {
        if (range[used] != '-') return 0;
        const std::string rest = range.substr(used + 1);
        size_t used_last = 0;
        last = std::stoi(rest, &used_last);
        if (used_last != rest.size()) return 0;
      }
      if (first < 0 || last < first) return 0;
      count += last - first + 1;
    } catch (const std::exception&) {
      return 0;
    }
  }
  return count;
}

bool cpus_bound_apart() {
  const int mine = affinity_count();
  if (mine <= 0) return false;
  const int offered =
      cgroup_cpuset().value_or(static_cast<int>(std::thread::hardware_concurrency()));
  return mine < offered;
}

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
  if (const int mine = affinity_count(); mine > 0) cpus = mine;
  if (const auto quota = cgroup_quota())
    cpus = std::min(cpus, static_cast<int>(std::ceil(*quota - 1e-9)));
  return std::max(1, cpus);
}

}  // namespace nmt
