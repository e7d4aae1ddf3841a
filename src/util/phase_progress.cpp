#include "util/phase_progress.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "util/duration.h"
#include "util/log.h"
#include "util/timer.h"

namespace nmt::log {

std::string format_count(double count) {
  const double a = std::fabs(count);
  if (a >= 1e9) return fmt::format("{:.2f}G", count / 1e9);
  if (a >= 1e6) return fmt::format("{:.2f}M", count / 1e6);
  if (a >= 1e4) return fmt::format("{:.1f}k", count / 1e3);
  // Slow rates (EM rounds a second) keep two digits instead of rounding to 0.
  if (a < 10 && count != std::floor(count)) return fmt::format("{:.2g}", count);
  return fmt::format("{:.0f}", count);
}

std::string progress_line(const std::string& what, const std::string& unit, double done,
                          double total, double seconds, bool estimated) {
  const double rate = seconds > 0 ? done / seconds : 0;
  std::string line = fmt::format("{}: {}", what, format_count(done));
  if (total > 0) {
    line += fmt::format(" of {}{} {} ({:.0f}%)", estimated ? "~" : "", format_count(total), unit,
                        100.0 * std::min(done, total) / total);
  } else {
    line += " " + unit;
  }
  line += fmt::format(", {} {}/s", format_count(rate), unit);
  if (total > 0) {
    line += ", ETA " + format_duration(rate > 0 ? std::max(0.0, total - done) / rate : -1);
  }
  return line;
}

PhaseProgress::PhaseProgress(std::string component, std::string what, std::string unit,
                             double total, std::chrono::milliseconds every)
    : component_(std::move(component)),
      what_(std::move(what)),
      unit_(std::move(unit)),
      total_(total),
      every_(every),
      start_(std::chrono::steady_clock::now()),
      last_line_(start_) {}

void PhaseProgress::update(double done, double fraction) {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_line_ < every_) return;
  last_line_ = now;
  reported_ = true;
  const bool estimated = total_ <= 0 && fraction > 0;
  const double total = estimated ? done / std::min(fraction, 1.0) : total_;
  info(component_, "{}", progress_line(what_, unit_, done, total, seconds(), estimated));
}

void PhaseProgress::finish(double done) {
  const double s = seconds();
  info(component_, "{}: {} {} in {}, {} {}/s", what_, format_count(done), unit_,
       format_duration(s), format_count(s > 0 ? done / s : 0), unit_);
}

double PhaseProgress::seconds() const {
  return seconds_since(start_);
}

}  // namespace nmt::log
