// The moving average of the parameters (train/ema.h): its formula, checkpoint state, and the
// swap that validation uses.
#include "catch_torch.h"  // first: see the header

#include <ATen/ATen.h>

#include "train/ema.h"
#include "util/error.h"

using nmt::train::NamedTensors;
using nmt::train::ParameterAverage;

namespace {

NamedTensors two_parameters() {
  return {{"a", at::tensor({1.0f, 2.0f})}, {"b", at::tensor({-4.0f})}};
}

}  // namespace

TEST_CASE("the moving average follows ema = d ema + (1 - d) p with a warm-up of d", "[train]") {
  NamedTensors params = two_parameters();
  ParameterAverage ema(params, 0.75);
  // d = min(decay, (1 + step) / (10 + step)): 2/11 at step 1, the full 0.75 from step 26 on.
  CHECK(ema.decay_at(1) == 2.0 / 11.0);
  CHECK(ema.decay_at(25) == 26.0 / 35.0);
  CHECK(ema.decay_at(26) == 0.75);
  CHECK(ParameterAverage(two_parameters(), 0.999).decay_at(1000) == 1001.0 / 1010.0);
  params[0].second.copy_(at::tensor({5.0f, 2.0f}));
  params[1].second.fill_(0.0f);
  ema.update(100);
  // 0.75 * 1 + 0.25 * 5 = 2; 0.75 * 2 + 0.25 * 2 = 2; 0.75 * -4 + 0 = -3
  CHECK(at::equal(ema.averages()[0].second, at::tensor({2.0f, 2.0f})));
  CHECK(at::equal(ema.averages()[1].second, at::tensor({-3.0f})));
  ema.update(101);  // 0.75 * 2 + 0.25 * 5 = 2.75
  CHECK(ema.averages()[0].second[0].item<float>() == 2.75f);
  // The averages are copies: the parameters are untouched.
  CHECK(at::equal(params[0].second, at::tensor({5.0f, 2.0f})));
  CHECK_THROWS_AS(ParameterAverage(two_parameters(), 0.0), nmt::ConfigError);
  CHECK_THROWS_AS(ParameterAverage(two_parameters(), 1.0), nmt::ConfigError);
}

TEST_CASE("the swap puts the averages in and the trained values back bit for bit", "[train]") {
  NamedTensors params = {{"w", at::randn({3, 4})}};
  const at::Tensor trained = params[0].second.clone();
  ParameterAverage ema(params, 0.5);
  params[0].second.add_(1.0f / 3.0f);
  const at::Tensor after_step = params[0].second.clone();
  ema.update(100);
  {
    ParameterAverage::Swap swap(ema);
    CHECK(at::equal(params[0].second, ema.averages()[0].second));
    CHECK_FALSE(at::equal(params[0].second, after_step));
  }
  CHECK(at::equal(params[0].second, after_step));
  ema.restart();
  CHECK(at::equal(ema.averages()[0].second, after_step));
  CHECK_FALSE(at::equal(trained, after_step));
}

TEST_CASE("checkpoint state round-trips, and a checkpoint without it leaves the average alone",
          "[train]") {
  NamedTensors params = two_parameters();
  ParameterAverage saved(params, 0.9);
  params[0].second.fill_(10.0f);
  saved.update(100);
  const NamedTensors state = saved.state();
  REQUIRE(state.size() == 2);
  CHECK(state[0].first == "a");  // named within the ema group
  auto find_in = [](const NamedTensors& tensors) {
    return [&tensors](std::string_view name) -> const at::Tensor* {
      for (const auto& [key, t] : tensors)
        if (key == name) return &t;
      return nullptr;
    };
  };
  ParameterAverage restored(two_parameters(), 0.9);
  CHECK(restored.load_state(find_in(state)));
  CHECK(at::equal(restored.averages()[0].second, saved.averages()[0].second));
  ParameterAverage untouched(two_parameters(), 0.9);
  const NamedTensors none;
  CHECK_FALSE(untouched.load_state(find_in(none)));
  CHECK(at::equal(untouched.averages()[0].second, at::tensor({1.0f, 2.0f})));
  // Some ema.* tensors but not all: a damaged checkpoint.
  const NamedTensors partial = {state[0]};
  CHECK_THROWS_AS(untouched.load_state(find_in(partial)), nmt::CheckpointError);
  const NamedTensors wrong_shape = {{"a", at::zeros({3})}, state[1]};
  CHECK_THROWS_AS(untouched.load_state(find_in(wrong_shape)), nmt::CheckpointError);
}
