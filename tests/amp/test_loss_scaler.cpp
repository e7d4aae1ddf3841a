#include "catch_torch.h"  // first: see the header
#include "skip.h"

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "amp/loss_scaler.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::amp::AmpOptions;
using nmt::amp::DynamicLossScaler;
using nmt::amp::ScalerStats;

namespace {
const c10::Device kCpu(c10::kCPU);

/// Powers of two everywhere, so every expected value below is exact.
AmpOptions small_options() {
  AmpOptions o;
  o.mode = nmt::amp::AmpMode::kFp16;
  o.init_scale = 8.0;
  o.growth_interval = 3;
  o.growth_factor = 2.0;
  o.backoff_factor = 0.5;
  o.min_scale = 1.0 / 1024;
  o.max_consecutive_skips = 3;
  return o;
}

/// One update: unscale `grads` (by the scale only) and update.
void step(DynamicLossScaler& scaler, bool overflow) {
  std::vector<at::Tensor> grads = {at::ones({3})};
  if (overflow) grads[0][1] = std::numeric_limits<float>::infinity();
  scaler.unscale_(grads, at::Tensor());
  scaler.update();
}

double found_inf(const DynamicLossScaler& scaler) { return scaler.found_inf().item<double>(); }
}  // namespace

TEST_CASE("scale multiplies the loss by the loss scale", "[amp][scaler]") {
  DynamicLossScaler scaler(small_options(), kCpu, true);
  const at::Tensor scaled = scaler.scale(at::scalar_tensor(1.5));
  CHECK(scaled.dim() == 0);
  CHECK(scaled.item<double>() == 12.0);
  CHECK(scaler.stats().scale == 8.0);
}

TEST_CASE("unscale divides by scale * extra divisor in one pass", "[amp][scaler]") {
  DynamicLossScaler scaler(small_options(), kCpu, true);
  const at::Tensor a = at::tensor({48.0f, -96.0f, 0.0f, 1.0f});
  const at::Tensor b = at::arange(6, at::kFloat).view({2, 3}) * 7;
  std::vector<at::Tensor> grads = {a.clone(), b.clone()};
  scaler.unscale_(grads, at::tensor(int64_t{4}));  // an int64 token count, as the trainer's
  CHECK(at::equal(grads[0], a / 32));
  CHECK(at::equal(grads[1], b / 32));
  CHECK(found_inf(scaler) == 0.0);

  // Not a power of two: the kernel multiplies by the float32 reciprocal of 8 * 3.
  grads = {a.clone()};
  scaler.unscale_(grads, at::tensor(3.0));
  CHECK(at::equal(grads[0], a * at::tensor(1.0f / 24.0f)));
}

TEST_CASE("an inf or NaN gradient sets found_inf, the next clean pass clears it", "[amp][scaler]") {
  DynamicLossScaler scaler(small_options(), kCpu, true);
  for (float bad : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
    std::vector<at::Tensor> grads = {at::ones({2}), at::ones({5})};
    grads[1][3] = bad;
    scaler.unscale_(grads, at::tensor(2));
    CHECK(found_inf(scaler) == 1.0);
    grads = {at::ones({2}), at::ones({5})};
    scaler.unscale_(grads, at::tensor(2));
    CHECK(found_inf(scaler) == 0.0);
  }
}

TEST_CASE("overflow backs the scale off and resets growth, clean steps grow it", "[amp][scaler]") {
  DynamicLossScaler scaler(small_options(), kCpu, true);
  step(scaler, false);
  step(scaler, false);
  CHECK(scaler.stats().scale == 8.0);
  step(scaler, true);  // two clean steps forgotten
  ScalerStats s = scaler.stats();
  CHECK(s.scale == 4.0);
  CHECK(s.skipped_total == 1);
  CHECK(s.consecutive_skips == 1);
  step(scaler, false);
  step(scaler, false);
  CHECK(scaler.stats().scale == 4.0);
  step(scaler, false);  // growth_interval = 3 clean steps
  s = scaler.stats();
  CHECK(s.scale == 8.0);
  CHECK(s.skipped_total == 1);
  CHECK(s.consecutive_skips == 0);
  step(scaler, false);
  step(scaler, false);
  CHECK(scaler.stats().scale == 8.0);  // the tracker restarted after growing
  step(scaler, false);
  CHECK(scaler.stats().scale == 16.0);
}

TEST_CASE("check throws at max_consecutive_skips overflows in a row", "[amp][scaler]") {
  DynamicLossScaler scaler(small_options(), kCpu, true);
  step(scaler, true);
  step(scaler, true);
  CHECK_NOTHROW(scaler.check(2));
  step(scaler, false);  // a clean step resets the run
  CHECK(scaler.stats().consecutive_skips == 0);
  step(scaler, true);
  step(scaler, true);
  CHECK_NOTHROW(scaler.check(5));
  step(scaler, true);
  const ScalerStats s = scaler.stats();
  CHECK(s.consecutive_skips == 3);
  CHECK(s.skipped_total == 5);
  CHECK(s.scale == 8.0 / 32);
  CHECK_THROWS_WITH(scaler.check(6), Contains("3 consecutive steps overflowed (loss scale 0.25)") &&
                                         Contains("lower the learning rate or use bf16"));
}

TEST_CASE("check throws when the scale falls below min_scale", "[amp][scaler]") {
  AmpOptions o = small_options();
  o.init_scale = 2.0;
  o.min_scale = 1.0;
  o.max_consecutive_skips = 100;
  DynamicLossScaler scaler(o, kCpu, true);
  step(scaler, true);
  CHECK_NOTHROW(scaler.check(1));  // 1 is not below 1
  step(scaler, true);
  CHECK_THROWS_AS(scaler.check(2), nmt::Error);
  CHECK_THROWS_WITH(scaler.check(2), Contains("loss scale 0.5 fell below amp.min_scale 1"));
}

TEST_CASE("disabled: scale 1, but still divides, flags NaN and counts skips", "[amp][scaler]") {
  DynamicLossScaler scaler(small_options(), kCpu, false);
  const at::Tensor loss = at::scalar_tensor(1.5);
  CHECK(scaler.scale(loss).is_same(loss));
  const at::Tensor a = at::tensor({6.0f, -3.0f});
  std::vector<at::Tensor> grads = {a.clone()};
  scaler.unscale_(grads, at::tensor(int64_t{3}));
  CHECK(at::equal(grads[0], a * at::tensor(1.0f / 3.0f)));
  CHECK(found_inf(scaler) == 0.0);
  for (int i = 0; i < 3; ++i) {
    grads = {at::tensor({std::nanf(""), 1.0f})};
    scaler.unscale_(grads, at::tensor(2.0));
    CHECK(found_inf(scaler) == 1.0);
    scaler.update();
  }
  const ScalerStats s = scaler.stats();
  CHECK(s.scale == 1.0);
  CHECK(s.skipped_total == 3);
  CHECK(s.consecutive_skips == 3);
  CHECK_THROWS_WITH(scaler.check(3), Contains("3 consecutive steps had non-finite gradients"));
}

TEST_CASE("scaler state round trip", "[amp][scaler]") {
  DynamicLossScaler scaler(small_options(), kCpu, true);
  step(scaler, true);
  step(scaler, false);
  step(scaler, false);  // growth tracker at 2
  std::map<std::string, at::Tensor> saved;
  for (auto& [name, t] : scaler.state()) saved[name] = t;
  REQUIRE(saved.size() == 5);
  const auto find = [&](std::string_view name) -> const at::Tensor* {
    auto it = saved.find(std::string(name));
    return it == saved.end() ? nullptr : &it->second;
  };

  DynamicLossScaler restored(small_options(), kCpu, true);
  restored.load_state(find);
  CHECK(restored.stats().scale == 4.0);
  CHECK(restored.stats().skipped_total == 1);
  for (auto& [name, t] : restored.state()) {
    INFO(name);
    CHECK(at::equal(t, saved.at(name)));
  }
  // The restored growth tracker counts on: one more clean step grows both.
  step(scaler, false);
  step(restored, false);
  CHECK(scaler.stats().scale == 8.0);
  CHECK(restored.stats().scale == 8.0);

  saved.erase("growth_tracker");  // named within the scaler group; messages give "scaler."
  DynamicLossScaler incomplete(small_options(), kCpu, true);
  CHECK_THROWS_AS(incomplete.load_state(find), nmt::CheckpointError);
  CHECK_THROWS_WITH(incomplete.load_state(find), Contains("scaler.growth_tracker"));
}

TEST_CASE("an fp16 scaler restored from an unscaled run's state starts at init_scale",
          "[amp][scaler]") {
  DynamicLossScaler unscaled(small_options(), kCpu, false);  // bf16 or fp32
  step(unscaled, true);
  std::map<std::string, at::Tensor> saved;
  for (auto& [name, t] : unscaled.state()) saved[name] = t;
  const auto find = [&](std::string_view name) -> const at::Tensor* {
    auto it = saved.find(std::string(name));
    return it == saved.end() ? nullptr : &it->second;
  };
  DynamicLossScaler fp16(small_options(), kCpu, true);
  const double init = fp16.stats().scale;
  REQUIRE(init > 1.0);
  fp16.load_state(find);
  CHECK(fp16.stats().scale == init);
  CHECK(fp16.stats().skipped_total == 1);  // the counters carry on
  // Checkpoints from before scaler.enabled: scale 1 with a zero growth tracker says the same.
  saved.erase("scaler.enabled");
  DynamicLossScaler older(small_options(), kCpu, true);
  older.load_state(find);
  CHECK(older.stats().scale == init);
}

TEST_CASE("on a GPU, the scaler state lives on the device and behaves as on the CPU",
          "[amp][scaler][cuda]") {
  if (!at::hasCUDA() || at::getNumGPUs() == 0) {
    NMT_SKIP_WITHOUT_CUDA("no CUDA device visible");
  }
  const c10::Device cuda(c10::kCUDA, 0);
  DynamicLossScaler scaler(small_options(), cuda, true);
  CHECK(scaler.found_inf().device() == cuda);
  CHECK(scaler.scale(at::scalar_tensor(1.5, at::kCUDA)).item<double>() == 12.0);
  const at::Tensor a = at::tensor({48.0f, -96.0f, 0.0f, 1.0f});
  std::vector<at::Tensor> grads = {a.to(cuda), a.to(cuda, at::kHalf)};
  scaler.unscale_(grads, at::tensor(int64_t{4}).to(cuda));
  CHECK(at::equal(grads[0].cpu(), a / 32));
  CHECK(at::equal(grads[1].cpu().to(at::kFloat), a / 32));
  CHECK(found_inf(scaler) == 0.0);
  grads[1][2] = std::numeric_limits<float>::infinity();
  scaler.unscale_(grads, at::Tensor());
  CHECK(found_inf(scaler) == 1.0);
  scaler.update();
  const ScalerStats s = scaler.stats();
  CHECK(s.scale == 4.0);
  CHECK(s.skipped_total == 1);
  CHECK(s.consecutive_skips == 1);
  for (auto& [name, t] : scaler.state()) CHECK(t.is_cpu());
}
