#include "dist/hang_monitor.h"

#include <fmt/format.h>

#include "util/timer.h"

namespace nmt::dist {

HangMonitor::HangMonitor(std::chrono::milliseconds warn_after, std::function<std::string()> report,
                         std::function<void(const std::string&)> emit)
    : warn_after_(warn_after),
      report_(std::move(report)),
      emit_(std::move(emit)),
      thread_([this] { run(); }) {}

HangMonitor::~HangMonitor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void HangMonitor::mark() {
  std::lock_guard<std::mutex> lock(mutex_);
  last_mark_ = std::chrono::steady_clock::now();
  reported_ = false;
  if (!marked_) {
    marked_ = true;
    changed_.notify_all();  // the first mark starts the watch
  }
}

int HangMonitor::reports() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reports_;
}

void HangMonitor::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    if (!marked_) {
      changed_.wait(lock);
      continue;
    }
    const auto due = last_mark_ + warn_after_;
    if (reported_ || std::chrono::steady_clock::now() < due) {
      // Wake at the deadline, or now and then while a reported stall lasts (a mark resets it).
      changed_.wait_until(lock, reported_ ? std::chrono::steady_clock::now() + warn_after_ : due);
      continue;
    }
    reported_ = true;
    const double stalled = seconds_since(last_mark_);
    lock.unlock();  // the report asks the store, which may take seconds
    emit_(fmt::format("no progress for {:.0f} s: a collective may hang{}", stalled, report_()));
    lock.lock();
    ++reports_;  // counted once emitted: a reader of reports() sees the line written
  }
}

}  // namespace nmt::dist
