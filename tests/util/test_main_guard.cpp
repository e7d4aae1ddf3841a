#include <catch2/catch.hpp>

#include <stdexcept>

#include "util/error.h"
#include "util/main_guard.h"

TEST_CASE("run_main passes the body's exit code and maps exceptions to 1", "[util]") {
  CHECK(nmt::run_main("t", [] { return 0; }) == 0);
  CHECK(nmt::run_main("t", [] { return 3; }) == 3);
  CHECK(nmt::run_main("t", []() -> int { NMT_THROW(nmt::DataError, "bad line {}", 7); }) == 1);
  CHECK(nmt::run_main("t", []() -> int { throw std::logic_error("bug"); }) == 1);
}

TEST_CASE("NMT_CHECK throws the named type with the formatted message and location", "[util]") {
  try {
    const int found = 3;
    NMT_CHECK(found == 4, nmt::CheckpointError, "expected {} tensors, found {}", 4, found);
    FAIL("NMT_CHECK did not throw");
  } catch (const nmt::CheckpointError& e) {
    CHECK(std::string(e.what()) == "expected 4 tensors, found 3");
    REQUIRE(e.where().file != nullptr);
    CHECK_THAT(e.where().file, Catch::Matchers::Contains("test_main_guard.cpp"));
    CHECK(e.where().line > 0);
  }
  CHECK_NOTHROW([] { NMT_CHECK(true, nmt::Error, "never"); }());
}
