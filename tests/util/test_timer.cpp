// util/timer: the one steady-clock "seconds since" that every measurement uses.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "util/timer.h"

TEST_CASE("seconds_since counts steady-clock seconds from a start", "[timer]") {
  using namespace std::chrono_literals;
  CHECK(nmt::seconds_since(nmt::Clock::now() + 10s) < -9.0);
  const auto start = nmt::Clock::now() - 2500ms;
  const double s = nmt::seconds_since(start);
  CHECK(s >= 2.5);
  CHECK(s < 60.0);
}
