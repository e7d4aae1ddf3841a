#pragma once
// Durations for people: elapsed times and ETAs in progress lines.

#include <chrono>
#include <string>

namespace nmt {

/// "12s", "3m05s", "2h07m" (rounded to the second); "?" when unknown (NaN, infinite, negative).
std::string format_duration(double seconds);
/// A timeout in seconds, as error messages state it: "1.5 s", "1800 s" (shortest form, %g).
std::string format_seconds(std::chrono::milliseconds t);

}  // namespace nmt
