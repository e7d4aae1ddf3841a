// Corpus sampling by temperature (data/corpus_sampling.h): exact counts for small cases.
#include <catch2/catch.hpp>

#include <cmath>

#include "data/corpus_sampling.h"
#include "util/error.h"

using nmt::data::drawn_per_epoch;

TEST_CASE("temperature 1 draws round(weight x pairs) from each corpus, as weights alone did",
          "[data]") {
  CHECK(drawn_per_epoch({{1000, 1.0}, {500, 2.0}, {300, 0.5}}, 1.0) ==
        std::vector<int64_t>{1000, 1000, 150});
  CHECK(drawn_per_epoch({{3, 0.5}}, 1.0) == std::vector<int64_t>{2});  // llround(1.5)
}

TEST_CASE("temperature flattens the shares and keeps the epoch's total", "[data]") {
  // n = 9000 and 1000, T = 2: masses 94.87 and 31.62, shares 0.75 and 0.25 of 10000.
  CHECK(drawn_per_epoch({{9000, 1.0}, {1000, 1.0}}, 2.0) == std::vector<int64_t>{7500, 2500});
  // T = 5: 9000^0.2 = 6.1780, 1000^0.2 = 3.9811: shares 0.60813, 0.39187.
  const auto t5 = drawn_per_epoch({{9000, 1.0}, {1000, 1.0}}, 5.0);
  CHECK(t5 == std::vector<int64_t>{6081, 3919});
  // A very high temperature: equal shares for equal weights.
  CHECK(drawn_per_epoch({{9000, 1.0}, {1000, 1.0}}, 1e9) == std::vector<int64_t>{5000, 5000});
  // Weights multiply the tempered shares: weight 3 on the small corpus at T = 2 gives masses
  // 94.87 and 94.87, half each; the total is 9000 + 3000.
  CHECK(drawn_per_epoch({{9000, 1.0}, {1000, 3.0}}, 2.0) == std::vector<int64_t>{6000, 6000});
}

TEST_CASE("rounding by largest remainder sums to the total exactly", "[data]") {
  // Three equal corpora of 1 pair at T = 3: total 3, one each; of 10, 10, 11: total 31.
  CHECK(drawn_per_epoch({{1, 1.0}, {1, 1.0}, {1, 1.0}}, 3.0) == std::vector<int64_t>{1, 1, 1});
  const auto counts = drawn_per_epoch({{10, 1.0}, {10, 1.0}, {11, 1.0}}, 4.0);
  CHECK(counts[0] + counts[1] + counts[2] == 31);
  CHECK(counts[0] == counts[1]);  // ties go to the earlier corpus, never split unevenly
}

TEST_CASE("a temperature that is not a positive number is refused", "[data]") {
  CHECK_THROWS_AS(drawn_per_epoch({{10, 1.0}}, 0.0), nmt::DataError);
  CHECK_THROWS_AS(drawn_per_epoch({{10, 1.0}}, -1.0), nmt::DataError);
}

TEST_CASE("the schema's lowest temperature gives finite counts on tiny and huge corpora",
          "[data]") {
  // T = 0.01 (the least data.sampling_temperature accepts) raises sizes to the 100th power:
  // 1,300^100 is past the largest double, which made inf / inf = NaN shares and a NaN cast to
  // a count. In log space the larger corpus simply takes (nearly) everything.
  constexpr double kLowest = 0.01;
  const auto huge = drawn_per_epoch({{10'000'000, 1.0}, {10, 1.0}}, kLowest);
  CHECK(huge == std::vector<int64_t>{10'000'010, 0});  // (10 / 10^7)^100 underflows to 0
  CHECK(drawn_per_epoch({{10, 1.0}, {10'000'000, 1.0}}, kLowest) ==
        std::vector<int64_t>{0, 10'000'010});
  // Equal sizes share equally at any temperature, however large the sizes.
  CHECK(drawn_per_epoch({{10, 1.0}, {10, 1.0}}, kLowest) == std::vector<int64_t>{10, 10});
  CHECK(drawn_per_epoch({{10'000'000, 1.0}, {10'000'000, 1.0}}, kLowest) ==
        std::vector<int64_t>{10'000'000, 10'000'000});
  // Past the old overflow point (about 1,200 pairs): 2,000 and 1,000 pairs, ratio 2^-100.
  CHECK(drawn_per_epoch({{2000, 1.0}, {1000, 1.0}}, kLowest) == std::vector<int64_t>{3000, 0});
  // Weights still multiply the tempered sizes: 1000^100 overflowed for both corpora here.
  CHECK(drawn_per_epoch({{1000, 1.0}, {1000, 2.0}}, kLowest) == std::vector<int64_t>{1000, 2000});
  // An empty corpus draws nothing at any temperature.
  CHECK(drawn_per_epoch({{0, 1.0}, {10'000'000, 1.0}}, kLowest) ==
        std::vector<int64_t>{0, 10'000'000});
  CHECK(drawn_per_epoch({{0, 1.0}, {10, 1.0}}, 1000.0) == std::vector<int64_t>{0, 10});
}

TEST_CASE("the schema's highest temperature gives near-equal shares of a huge and a tiny corpus",
          "[data]") {
  // T = 1000: 10^7^0.001 = 1.016250, 10^0.001 = 1.002305: shares 0.503454 and 0.496546 of
  // 10,000,010.
  const auto counts = drawn_per_epoch({{10'000'000, 1.0}, {10, 1.0}}, 1000.0);
  CHECK(counts[0] + counts[1] == 10'000'010);
  CHECK(counts[0] == Approx(5'034'543).epsilon(1e-6));
}

TEST_CASE("a weight whose pairs an epoch no count can hold is refused, not rounded", "[data]") {
  // llround of 2^100 x 1000 has no int64 result; the epoch's size would be garbage.
  CHECK_THROWS_AS(drawn_per_epoch({{1000, std::pow(2.0, 100)}}, 1.0), nmt::DataError);
  CHECK_THROWS_AS(drawn_per_epoch({{1000, 1.0}, {1000, 1e300}}, 5.0), nmt::DataError);
}
