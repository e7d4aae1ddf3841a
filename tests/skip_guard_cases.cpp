// Hidden cases ("[.]": not discovered, so not run as tests of their own) that the catch-guard
// CTest tests (tests/CMakeLists.txt) run by name, to show that NMT_SKIP (skip.h) cannot hide
// a failure and that a [cuda] case cannot skip where a GPU is required.
#include <catch2/catch.hpp>

#include "skip.h"

TEST_CASE("skip-guard: a skip after a failed check", "[.]") {
  CHECK(1 == 2);
  NMT_SKIP("a reason");
}

TEST_CASE("skip-guard: a skip without a failure", "[.]") { NMT_SKIP("a reason"); }

TEST_CASE("skip-guard: a cuda skip", "[.]") { NMT_SKIP_WITHOUT_CUDA("no GPU here"); }
