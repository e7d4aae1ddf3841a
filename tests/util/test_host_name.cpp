// util/host_name: the one gethostname() wrapper (rendezvous announcements, TensorBoard names).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <string>

#include "util/host_name.h"

TEST_CASE("host_name is gethostname, or nothing when the name is unset", "[host_name]") {
  char expected[256] = {};
  const bool named = ::gethostname(expected, sizeof(expected) - 1) == 0 && expected[0] != '\0';
  const auto name = nmt::host_name();
  REQUIRE(name.has_value() == named);
  if (named) CHECK(*name == std::string(expected));
}
