// Progress lines of long phases (util/phase_progress.h): counts, rates and ETAs for people.
#include <catch2/catch.hpp>

#include "util/phase_progress.h"

using nmt::log::format_count;
using nmt::log::progress_line;

TEST_CASE("counts read as people write them", "[util][progress]") {
  CHECK(format_count(950) == "950");
  CHECK(format_count(0.0869) == "0.087");
  CHECK(format_count(2.5) == "2.5");
  CHECK(format_count(3) == "3");
  CHECK(format_count(0) == "0");
  CHECK(format_count(38123) == "38.1k");
  CHECK(format_count(5e6) == "5.00M");
  CHECK(format_count(3.4e9) == "3.40G");
}

TEST_CASE("a progress line has the rate, and the share and ETA when the total is known",
          "[util][progress]") {
  // 5,000,000 pairs at 38k pairs/s: 1.2M done after 31.5 s, 100 s to go.
  CHECK(progress_line("encoding train", "pairs", 1.2e6, 5e6, 31.5789) ==
        "encoding train: 1.20M of 5.00M pairs (24%), 38.0k pairs/s, ETA 1m40s");
  CHECK(progress_line("reading sentences", "lines", 20000, 0, 2) ==
        "reading sentences: 20.0k lines, 10.0k lines/s");
  CHECK(progress_line("encoding", "pairs", 0, 100, 0) ==
        "encoding: 0 of 100 pairs (0%), 0 pairs/s, ETA ?");
  // A total estimated from the share of the file read.
  CHECK(progress_line("encoding", "pairs", 1000, 4000, 10, /*estimated=*/true) ==
        "encoding: 1000 of ~4000 pairs (25%), 100 pairs/s, ETA 30s");
}
