// The hang monitor (dist/hang_monitor.h): it watches from the first mark, a stall of the
// progress marks is reported once, marks keep it quiet, and it stops promptly.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/hang_monitor.h"

using nmt::dist::HangMonitor;
using namespace std::chrono_literals;

namespace {

/// What the monitor emitted, safe to read from the test thread.
struct Emitted {
  std::mutex mutex;
  std::vector<std::string> lines;
  void add(const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex);
    lines.push_back(line);
  }
  std::vector<std::string> get() {
    std::lock_guard<std::mutex> lock(mutex);
    return lines;
  }
};

/// Waits (up to a generous deadline, as the machine may be busy) until `monitor` has made
/// `count` reports.
bool wait_for_reports(const HangMonitor& monitor, int count) {
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (monitor.reports() < count && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  return monitor.reports() >= count;
}

}  // namespace

TEST_CASE("nothing is reported before the first mark: the ranks are still preparing", "[dist]") {
  Emitted emitted;
  HangMonitor monitor(50ms, [] { return std::string(); },
                      [&emitted](const std::string& line) { emitted.add(line); });
  std::this_thread::sleep_for(500ms);  // ten deadlines
  CHECK(monitor.reports() == 0);
  CHECK(emitted.get().empty());
  monitor.mark();  // the first update: from here a stall is reported
  CHECK(wait_for_reports(monitor, 1));
}

TEST_CASE("a stall of the progress marks is reported once, with who is behind", "[dist]") {
  Emitted emitted;
  HangMonitor monitor(50ms, [] { return "; behind: rank 1 is at 'step 7: backward done'"; },
                      [&emitted](const std::string& line) { emitted.add(line); });
  monitor.mark();
  REQUIRE(wait_for_reports(monitor, 1));
  std::this_thread::sleep_for(300ms);  // more deadlines pass within the same stall
  const auto lines = emitted.get();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("no progress for ", 0) == 0);
  CHECK(lines[0].find("a collective may hang; behind: rank 1 is at 'step 7: backward done'") !=
        std::string::npos);
  // Progress resumes, then stalls again: a second report.
  monitor.mark();
  CHECK(wait_for_reports(monitor, 2));
}

TEST_CASE("steady progress marks keep the monitor quiet, and it reports once they stop", "[dist]") {
  std::atomic<int> emitted{0};
  // Marks every 10 ms for 4 deadlines: a monitor that ignored them would have reported. The
  // deadline leaves a busy machine 50 times the mark interval.
  constexpr auto kWarnAfter = 500ms;
  HangMonitor monitor(kWarnAfter, [] { return std::string(); },
                      [&emitted](const std::string&) { ++emitted; });
  const auto until = std::chrono::steady_clock::now() + 4 * kWarnAfter;
  while (std::chrono::steady_clock::now() < until) {
    monitor.mark();
    std::this_thread::sleep_for(10ms);
  }
  CHECK(emitted == 0);
  CHECK(monitor.reports() == 0);
  // It was watching all along: once the marks stop, the stall is reported.
  CHECK(wait_for_reports(monitor, 1));
  CHECK(emitted == 1);
}

TEST_CASE("a report is counted once its line is written, also when writing it is slow", "[dist]") {
  // The report asks the store and the log may block: reports() must not run ahead of what
  // was emitted (CI once read reports() == 1 with nothing emitted yet).
  std::atomic<int> emitted{0};
  HangMonitor monitor(20ms, [] { return std::string(); }, [&emitted](const std::string&) {
    std::this_thread::sleep_for(300ms);
    ++emitted;
  });
  monitor.mark();
  REQUIRE(wait_for_reports(monitor, 1));
  CHECK(emitted == 1);
}
