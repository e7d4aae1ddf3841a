#include "catch_torch.h"  // first: see the header

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "model/dropout.h"

namespace {
/// nmt::model::dropout (a plain `dropout(tensor, ...)` would also find at::dropout).
at::Tensor drop(const at::Tensor& x, double p, bool training) {
  return nmt::model::dropout(x, p, training);
}
}  // namespace

TEST_CASE("CPU dropout keeps 1 - p of the elements, scaled to keep the expectation",
          "[model][dropout]") {
  torch::manual_seed(11);
  const at::Tensor x = at::ones({1000, 1000});
  for (double p : {0.1, 0.3}) {
    INFO("p " << p);
    const at::Tensor y = drop(x, p, /*training=*/true);
    const double kept = y.ne(0).to(at::kDouble).mean().item<double>();
    CHECK(kept == Approx(1.0 - p).margin(0.003));
    CHECK(y.mean().item<double>() == Approx(1.0).margin(0.005));
    CHECK(y.max().item<float>() == Approx(1.0 / (1.0 - p)).epsilon(1e-4));
  }
  // Off in evaluation and at p = 0: the input itself.
  CHECK(drop(x, 0.1, false).is_same(x));
  CHECK(drop(x, 0.0, true).is_same(x));
}

TEST_CASE("CPU dropout draws from the seeded generator and its gradient is the same mask",
          "[model][dropout]") {
  at::Tensor x = at::randn({37, 53}).requires_grad_(true);
  torch::manual_seed(5);
  const at::Tensor a = drop(x, 0.2, true);
  const at::Tensor b = drop(x, 0.2, true);
  torch::manual_seed(5);
  const at::Tensor again = drop(x, 0.2, true);
  CHECK(at::equal(a, again));
  CHECK_FALSE(at::equal(a, b));
  a.sum().backward();
  // d(sum)/dx is the scale where kept, 0 where dropped: exactly y / x.
  const at::Tensor expected = at::where(a.ne(0), at::full_like(x, 1.0 / 0.8), at::zeros_like(x));
  CHECK(at::allclose(x.grad(), expected, 1e-5, 1e-6));
  // Half precision stays half precision; a non-contiguous input works.
  const at::Tensor h = at::randn({8, 6}).to(at::kBFloat16).t();
  CHECK(drop(h, 0.5, true).scalar_type() == at::kBFloat16);
  CHECK(drop(h, 0.5, true).sizes() == h.sizes());
}
