// util/phase_record: phases.jsonl, the phase times scripts/bench/scale.sh reads.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "util/phase_record.h"

TEST_CASE("record_phase appends one JSON line per phase, with its figures", "[phase_record]") {
  nmt::test::TempDir dir;
  const auto run_dir = dir.path() / "run";  // created when missing
  nmt::record_phase(run_dir, "encoding", 12.5, {{"pairs", 1000}, {"threads", 2}});
  nmt::record_phase(run_dir, "first update", 0.25, {});
  const auto lines = nmt::test::lines_of(nmt::test::read_file(nmt::phase_record_file(run_dir)));
  REQUIRE(lines.size() == 2);
  const auto first = nlohmann::json::parse(lines[0]);
  CHECK(first["phase"] == "encoding");
  CHECK(first["seconds"] == 12.5);
  CHECK(first["pid"] == ::getpid());
  CHECK(first["pairs"] == 1000);
  CHECK(first["threads"] == 2);
  CHECK(first["max_rss_mb"].get<double>() > 0);
  CHECK(first["end_unix"].get<double>() > 1.7e9);
  const auto second = nlohmann::json::parse(lines[1]);
  CHECK(second["phase"] == "first update");
  CHECK(second.size() == 5);  // phase, pid, end_unix, seconds, max_rss_mb
}
