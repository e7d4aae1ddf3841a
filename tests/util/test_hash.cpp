// util/hash: the one SplitMix64 (batch plans, corpus draws, dropout masks, sampling draws); it
// must give the same bits on every machine.
#include <catch2/catch.hpp>

#include "util/hash.h"

TEST_CASE("splitmix64 gives the reference generator's outputs", "[hash]") {
  // The first outputs of Vigna's splitmix64.c seeded with 0 are splitmix64(0), the next ones
  // splitmix64(k * 0x9E3779B97F4A7C15): pinned, since plans and masks of saved runs depend on it.
  CHECK(nmt::splitmix64(0) == 0xE220A8397B1DCDAFull);
  CHECK(nmt::splitmix64(1) == 0x910A2DEC89025CC1ull);
  CHECK(nmt::splitmix64(~uint64_t{0}) == 0xE4D971771B652C20ull);
}
