#pragma once
// Durations for people: elapsed times and ETAs in progress lines.

#include <string>

namespace nmt {

/// "12s", "3m05s", "2h07m" (rounded to the second); "?" when unknown (NaN, infinite, negative).
std::string format_duration(double seconds);

}  // namespace nmt
