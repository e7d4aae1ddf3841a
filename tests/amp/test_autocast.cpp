#include "catch_torch.h"  // first: see the header
#include "skip.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include "amp/autocast.h"
#include "util/error.h"

using nmt::amp::AmpMode;
using nmt::amp::AutocastScope;

namespace {
constexpr auto kCpu = c10::DeviceType::CPU;

/// dtype of a float32 matmul under the current autocast state.
c10::ScalarType matmul_dtype() {
  const at::Tensor a = at::ones({2, 3});
  const at::Tensor b = at::ones({3, 2});
  return at::matmul(a, b).scalar_type();
}
}  // namespace

TEST_CASE("a bf16 scope autocasts CPU matmuls and restores the previous state", "[amp][autocast]") {
  // A previous dtype different from the scope's, to see that it is restored.
  at::autocast::set_autocast_dtype(kCpu, at::kHalf);
  REQUIRE_FALSE(at::autocast::is_autocast_enabled(kCpu));
  CHECK(matmul_dtype() == at::kFloat);
  {
    AutocastScope scope(AmpMode::kBf16, kCpu);
    CHECK(at::autocast::is_autocast_enabled(kCpu));
    CHECK(at::autocast::get_autocast_dtype(kCpu) == at::kBFloat16);
    CHECK(matmul_dtype() == at::kBFloat16);
  }
  CHECK_FALSE(at::autocast::is_autocast_enabled(kCpu));
  CHECK(at::autocast::get_autocast_dtype(kCpu) == at::kHalf);
  CHECK(matmul_dtype() == at::kFloat);
  at::autocast::set_autocast_dtype(kCpu, at::kBFloat16);  // the default again
}

TEST_CASE("autocast scopes nest, kOff leaves the enclosing scope in effect", "[amp][autocast]") {
  {
    AutocastScope outer(AmpMode::kBf16, kCpu);
    CHECK(matmul_dtype() == at::kBFloat16);
    {
      AutocastScope inner(AmpMode::kFp16, kCpu);
      CHECK(at::autocast::get_autocast_dtype(kCpu) == at::kHalf);
      CHECK(matmul_dtype() == at::kHalf);
      {
        AutocastScope off(AmpMode::kOff, kCpu);
        CHECK(matmul_dtype() == at::kHalf);
      }
    }
    CHECK(at::autocast::is_autocast_enabled(kCpu));
    CHECK(at::autocast::get_autocast_dtype(kCpu) == at::kBFloat16);
    CHECK(matmul_dtype() == at::kBFloat16);
  }
  CHECK_FALSE(at::autocast::is_autocast_enabled(kCpu));
  CHECK(matmul_dtype() == at::kFloat);
  // The nesting count is back to 0: one more enter/exit pair reports depth 1 -> 0.
  CHECK(at::autocast::increment_nesting() == 1);
  CHECK(at::autocast::decrement_nesting() == 0);
}

TEST_CASE("kOff touches nothing", "[amp][autocast]") {
  {
    AutocastScope off(AmpMode::kOff, kCpu);
    CHECK_FALSE(at::autocast::is_autocast_enabled(kCpu));
    CHECK(matmul_dtype() == at::kFloat);
  }
  CHECK_FALSE(at::autocast::is_autocast_enabled(kCpu));
}

TEST_CASE("autocast support by mode and device", "[amp][autocast]") {
  using nmt::amp::autocast_supported;
  CHECK(autocast_supported(AmpMode::kOff, c10::DeviceType::CUDA));
  CHECK(autocast_supported(AmpMode::kBf16, kCpu));
  CHECK(autocast_supported(AmpMode::kFp16, kCpu));
  CHECK(autocast_supported(AmpMode::kFp16, c10::DeviceType::CUDA) == at::hasCUDA());
  CHECK_FALSE(autocast_supported(AmpMode::kBf16, c10::DeviceType::Meta));
  CHECK_THROWS_AS(AutocastScope(AmpMode::kBf16, c10::DeviceType::Meta), nmt::Error);
}

TEST_CASE("on a GPU, fp16 and bf16 scopes autocast CUDA matmuls", "[amp][autocast][cuda]") {
  if (!at::hasCUDA() || at::getNumGPUs() == 0) {
    NMT_SKIP_WITHOUT_CUDA("no CUDA device visible");
  }
  const at::Tensor a = at::ones({4, 4}, at::kCUDA);
  for (AmpMode mode : {AmpMode::kFp16, AmpMode::kBf16}) {
    if (!nmt::amp::autocast_supported(mode, c10::DeviceType::CUDA)) continue;
    {
      AutocastScope scope(mode, c10::DeviceType::CUDA);
      CHECK(at::matmul(a, a).scalar_type() == nmt::amp::autocast_dtype(mode));
      CHECK(matmul_dtype() == at::kFloat);  // CPU autocast untouched
    }
    CHECK(at::matmul(a, a).scalar_type() == at::kFloat);
  }
}
