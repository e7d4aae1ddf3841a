// util/duration: the one format of elapsed times and ETAs (training, translation, data).
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <limits>

#include "util/duration.h"

using nmt::format_duration;

TEST_CASE("format_duration: seconds, minutes, hours, rounded to the second", "[duration]") {
  CHECK(format_duration(0) == "0s");
  CHECK(format_duration(12.4) == "12s");
  CHECK(format_duration(59.6) == "1m00s");
  CHECK(format_duration(185) == "3m05s");
  CHECK(format_duration(2 * 3600 + 7 * 60 + 59) == "2h07m");
}

TEST_CASE("format_duration: an unknown duration is a question mark", "[duration]") {
  // translator.cpp once had its own copy, which printed "0s" for NaN.
  CHECK(format_duration(std::nan("")) == "?");
  CHECK(format_duration(std::numeric_limits<double>::infinity()) == "?");
  CHECK(format_duration(-1) == "?");
}

TEST_CASE("format_seconds states a timeout in seconds, shortest form", "[duration]") {
  // rendezvous and process-group errors once had a copy each.
  using std::chrono::milliseconds;
  CHECK(nmt::format_seconds(milliseconds(1500)) == "1.5 s");
  CHECK(nmt::format_seconds(milliseconds(1800000)) == "1800 s");
  CHECK(nmt::format_seconds(milliseconds(200)) == "0.2 s");
  CHECK(nmt::format_seconds(milliseconds(0)) == "0 s");
}
