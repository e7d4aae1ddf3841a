#include <catch2/catch.hpp>

#include "test_support.h"
#include "util/log.h"

using nmt::log::Level;

TEST_CASE("log levels parse by name and print back", "[util]") {
  for (Level level : {Level::kTrace, Level::kDebug, Level::kInfo, Level::kWarn, Level::kError,
                      Level::kOff}) {
    Level parsed = Level::kOff;
    REQUIRE(nmt::log::parse_level(nmt::log::level_name(level), &parsed));
    CHECK(parsed == level);
  }
  Level unchanged = Level::kInfo;
  CHECK_FALSE(nmt::log::parse_level("verbose", &unchanged));
  CHECK(unchanged == Level::kInfo);
}

TEST_CASE("each rank's file gets its messages with the component tag", "[util]") {
  nmt::test::TempDir dir;
  nmt::log::LogOptions options;
  options.level = Level::kInfo;
  nmt::log::init(options, /*rank=*/1, /*world_size=*/2);
  CHECK(nmt::log::rank() == 1);
  CHECK(nmt::log::world_size() == 2);
  const auto file = dir.path() / "logs" / "rank1.log";
  nmt::log::add_file_sink(file);
  CHECK_FALSE(nmt::log::enabled(Level::kDebug));
  nmt::log::debug("data", "hidden {}", 1);
  nmt::log::info("data", "{} sentence pairs", 3200);
  nmt::log::warn("train", "loss scale {}", 0.5);
  nmt::log::shutdown();
  const std::string text = nmt::test::read_file(file);
  CHECK_THAT(text, Catch::Matchers::Contains("[rank 1] [data] 3200 sentence pairs"));
  CHECK_THAT(text, Catch::Matchers::Contains("[rank 1] [train] loss scale 0.5"));
  CHECK(text.find("hidden") == std::string::npos);
  nmt::log::init(nmt::log::LogOptions{}, 0, 1);
}
