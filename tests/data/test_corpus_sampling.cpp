// Corpus sampling by temperature (data/corpus_sampling.h): exact counts for small cases.
#include <catch2/catch.hpp>

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
