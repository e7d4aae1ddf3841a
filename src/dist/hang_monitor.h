#pragma once
// Hang reports for collectives that the host does not wait for. With NCCL, waiting on a
// collective only makes the compute stream wait for NCCL's stream and returns at once (the
// update queues its work without a host-device sync), so a collective that never completes is
// noticed by NCCL's watchdog alone, which aborts the process after the process group's
// timeout without saying who is behind. The monitor watches the progress marks that every
// update writes (ProgressMarks::mark, progress_marks.h): when none has come for `warn_after` (set
// below that timeout), it emits the ranks' progress report once ("behind: rank 1 is at ..."),
// and again only after progress has resumed and stalled anew. It watches from the first mark
// on: before it, the ranks prepare data and fit the batch size at their own pace (rank 0 may
// train a vocabulary for minutes), and there is no report to make.
//
//   HangMonitor monitor(0.8 * timeout, [&] { return progress_report(); }, log_error);
//   monitor.mark();   // at every progress mark

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace nmt::dist {

/// A thread that reports when progress marks stop coming.
class HangMonitor {
 public:
  /// Starts the thread; the first stall is counted from the first mark(). `report` says who is
  /// behind (it may take a while: it asks the store); `emit` writes the message.
  HangMonitor(std::chrono::milliseconds warn_after, std::function<std::string()> report,
              std::function<void(const std::string&)> emit);
  /// Stops and joins the thread.
  ~HangMonitor();
  HangMonitor(const HangMonitor&) = delete;
  HangMonitor& operator=(const HangMonitor&) = delete;

  /// Progress was made: the stall clock restarts.
  void mark();
  /// Reports emitted so far (counted after `emit` returns).
  int reports() const;

 private:
  void run();

  const std::chrono::milliseconds warn_after_;
  const std::function<std::string()> report_;
  const std::function<void(const std::string&)> emit_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::chrono::steady_clock::time_point last_mark_;
  bool marked_ = false;    ///< a mark has come: watching
  bool reported_ = false;  ///< this stall was reported
  bool stop_ = false;
  int reports_ = 0;
  std::thread thread_;
};

}  // namespace nmt::dist
