#include <catch2/catch.hpp>

#include "train/lr_schedule.h"
#include "util/error.h"

using nmt::train::learning_rate;
using nmt::train::LrSchedule;
using nmt::train::TrainOptions;

namespace {
TrainOptions schedule(LrSchedule kind, int64_t warmup, int64_t max_steps) {
  TrainOptions o;
  o.lr = 1e-3;
  o.schedule = kind;
  o.warmup_steps = warmup;
  o.max_steps = max_steps;
  return o;
}
}  // namespace

TEST_CASE("linear warm-up from lr / warmup to lr", "[train][lr]") {
  for (LrSchedule kind : {LrSchedule::kInverseSqrt, LrSchedule::kConstant, LrSchedule::kCosine}) {
    const TrainOptions o = schedule(kind, 4, 104);
    CHECK(learning_rate(o, 1) == Approx(2.5e-4));
    CHECK(learning_rate(o, 2) == Approx(5e-4));
    CHECK(learning_rate(o, 4) == Approx(1e-3));
  }
}

TEST_CASE("inverse square root after warm-up", "[train][lr]") {
  const TrainOptions o = schedule(LrSchedule::kInverseSqrt, 4, 0);
  CHECK(learning_rate(o, 16) == Approx(5e-4));   // 1e-3 * sqrt(4 / 16)
  CHECK(learning_rate(o, 400) == Approx(1e-4));  // 1e-3 * sqrt(4 / 400)
  const TrainOptions no_warmup = schedule(LrSchedule::kInverseSqrt, 0, 0);
  CHECK(learning_rate(no_warmup, 1) == Approx(1e-3));
  CHECK(learning_rate(no_warmup, 4) == Approx(5e-4));
}

TEST_CASE("constant after warm-up", "[train][lr]") {
  CHECK(learning_rate(schedule(LrSchedule::kConstant, 4, 0), 5) == Approx(1e-3));
  CHECK(learning_rate(schedule(LrSchedule::kConstant, 4, 0), 100000) == Approx(1e-3));
  CHECK(learning_rate(schedule(LrSchedule::kConstant, 0, 0), 1) == Approx(1e-3));
}

TEST_CASE("half cosine from lr to 0 between warm-up and max_steps", "[train][lr]") {
  const TrainOptions o = schedule(LrSchedule::kCosine, 4, 104);
  CHECK(learning_rate(o, 29) == Approx(1e-3 * (1 + std::sqrt(0.5)) / 2));  // a quarter in
  CHECK(learning_rate(o, 54) == Approx(5e-4));                             // half way
  CHECK(learning_rate(o, 104) == Approx(0.0).margin(1e-12));
  CHECK(learning_rate(o, 500) == Approx(0.0).margin(1e-12));
  // No max_steps: constant after warm-up.
  CHECK(learning_rate(schedule(LrSchedule::kCosine, 4, 0), 1000) == Approx(1e-3));
  CHECK(learning_rate(schedule(LrSchedule::kCosine, 0, 100), 1) ==
        Approx(1e-3 * (1 + std::cos(M_PI / 100)) / 2));
}

TEST_CASE("learning_rate rejects update 0", "[train][lr]") {
  CHECK_THROWS_AS(learning_rate(TrainOptions(), 0), nmt::Error);
}
