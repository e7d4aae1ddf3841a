#pragma once
// Wall-clock time for measuring and reporting: a monotonic clock, never the calendar one.

#include <chrono>

namespace nmt {

/// The clock every measurement uses.
using Clock = std::chrono::steady_clock;

/// Seconds from `start` to now.
inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace nmt
