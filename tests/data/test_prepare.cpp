// data/prepare: what the data options resolve to for a run.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

#include "data/prepare.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::data::resolve_update_freq;

TEST_CASE("tokens_per_update resolves to the steps that reach it, within update_freq's limit",
          "[data]") {
  nmt::data::DataOptions options;
  options.update_freq = 3;
  CHECK(resolve_update_freq(options, 4096, 2) == 3);  // tokens_per_update 0: update_freq
  options.tokens_per_update = 25000;
  CHECK(resolve_update_freq(options, 4096, 2) == 4);  // 3 x 8192 < 25000 <= 4 x 8192
  options.tokens_per_update = 100;
  CHECK(resolve_update_freq(options, 4096, 2) == 1);
  // Past update_freq's limit it is refused: it was taken as it came (any number of steps),
  // and with values near 2^63 the sum overflowed.
  options.tokens_per_update = (int64_t{1} << 16) * 4096 + 1;
  CHECK_THROWS_WITH(resolve_update_freq(options, 4096, 1),
                    Contains("data.tokens_per_update (268435457) needs 65537 steps") &&
                        Contains("limit of 65536"));
  // Computed without overflow: one step of 8 x (2^63 - 1) tokens covers 2^63 - 1.
  options.tokens_per_update = std::numeric_limits<int64_t>::max();
  CHECK(resolve_update_freq(options, std::numeric_limits<int64_t>::max(), 8) == 1);
  CHECK_THROWS_AS(resolve_update_freq(options, 1, 1), nmt::ConfigError);
}
