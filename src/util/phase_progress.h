#pragma once
// Progress lines for a long phase that would otherwise be silent between its first and last
// line (SentencePiece reading its sentences, encoding a corpus): at most one info line every
// few seconds with the count so far, its rate and, where the total is known, the share done
// and an ETA, as training's log lines have:
//
//   [data] encoding train: 1.20M of 5.00M pairs (24%), 38.1k pairs/s, ETA 1m40s
//
//   log::PhaseProgress progress("data", "encoding train", "pairs", total);
//   for (...) progress.update(done);     // cheap: a clock read; logs now and then
//   progress.finish(done);               // "[data] encoding train: 5.00M pairs in 2m10s, 38.4k pairs/s"

#include <chrono>
#include <string>

namespace nmt::log {

/// "950", "12.3k", "1.20M", "3.40G": a count for people.
std::string format_count(double count);

/// The text of a progress line: `what`: `done` [of `total` (share)] `unit`, rate[, ETA]. A
/// `total` of 0 is unknown: no share and no ETA; an estimated one is written "of ~total".
std::string progress_line(const std::string& what, const std::string& unit, double done,
                          double total, double seconds, bool estimated = false);

/// Rank 0's progress lines of one phase.
class PhaseProgress {
 public:
  /// `total` 0: unknown; `every`: the least time between two lines.
  PhaseProgress(std::string component, std::string what, std::string unit, double total = 0,
                std::chrono::milliseconds every = std::chrono::seconds(10));

  /// `done` units so far: logs a line when `every` has passed since the last one. Without a
  /// total, `fraction` (the share of the input read, when known) estimates it.
  void update(double done, double fraction = 0);
  /// The closing line: the count, the time taken and the rate.
  void finish(double done);
  /// Seconds since the phase started.
  double seconds() const;
  /// Whether update() has logged a line: a phase that ended before the first one (a small
  /// corpus planned in a blink, every epoch) may then end without its closing line too.
  bool reported() const { return reported_; }

 private:
  std::string component_, what_, unit_;
  double total_;
  std::chrono::milliseconds every_;
  std::chrono::steady_clock::time_point start_, last_line_;
  bool reported_ = false;
};

}  // namespace nmt::log
