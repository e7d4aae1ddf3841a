#include "catch_torch.h"  // first: see the header

#include <cmath>
#include <vector>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "train/loss.h"


using nmt::train::label_smoothed_cross_entropy;
using nmt::train::LossSums;

namespace {
constexpr int64_t kPad = 1;

/// An int64 [rows, cols] tensor of target ids.
at::Tensor targets(std::vector<int64_t> values, int64_t rows, int64_t cols) {
  return at::tensor(values).view({rows, cols});
}
}  // namespace

TEST_CASE("uniform logits cost log(V) per token whatever epsilon", "[train][loss]") {
  // V = 5, targets: three real tokens and one pad.
  const at::Tensor logits = at::zeros({1, 4, 5});
  const at::Tensor target = targets({3, 0, 4, kPad}, 1, 4);
  for (double eps : {0.0, 0.1, 0.5}) {
    INFO("epsilon " << eps);
    const LossSums s = label_smoothed_cross_entropy(logits, target, eps, kPad);
    // nll = log 5; smooth = 5 log 5; (1 - eps) log 5 + eps / 5 * 5 log 5 = log 5.
    CHECK(s.loss.item<double>() == Approx(3 * std::log(5.0)));
    CHECK(s.nll.item<double>() == Approx(3 * std::log(5.0)));
    CHECK(s.tokens.item<int64_t>() == 3);
  }
}

TEST_CASE("a hand-computed label-smoothed loss", "[train][loss]") {
  // logits (0, ln 2, ln 3): p = (1/6, 2/6, 3/6). Target 2: nll = ln 2.
  // smooth = -(ln 1/6 + ln 1/3 + ln 1/2) = ln 36.
  const at::Tensor logits = at::tensor({0.0, std::log(2.0), std::log(3.0)}).view({1, 1, 3});
  const at::Tensor target = targets({2}, 1, 1);
  const LossSums s = label_smoothed_cross_entropy(logits, target, 0.1, kPad);
  CHECK(s.nll.item<double>() == Approx(std::log(2.0)).epsilon(1e-6));
  CHECK(s.loss.item<double>() ==
        Approx(0.9 * std::log(2.0) + 0.1 / 3.0 * std::log(36.0)).epsilon(1e-6));
}

TEST_CASE("padding contributes nothing, not even a gradient", "[train][loss]") {
  torch::manual_seed(5);
  at::Tensor logits = at::randn({2, 3, 7}).requires_grad_(true);
  const at::Tensor target = targets({4, 2, kPad, 6, kPad, kPad}, 2, 3);
  const LossSums s = label_smoothed_cross_entropy(logits, target, 0.1, kPad);
  CHECK(s.tokens.item<int64_t>() == 3);

  // Other logits at the padded positions leave every sum unchanged.
  at::Tensor changed = logits.detach().clone();
  changed[0][2].fill_(100.0);
  changed[1].slice(0, 1, 3).normal_(0.0, 50.0);
  const LossSums t = label_smoothed_cross_entropy(changed, target, 0.1, kPad);
  CHECK(t.loss.item<double>() == Approx(s.loss.item<double>()).epsilon(1e-6));
  CHECK(t.nll.item<double>() == Approx(s.nll.item<double>()).epsilon(1e-6));

  s.loss.backward();
  const at::Tensor grad = logits.grad();
  CHECK(grad[0][2].abs().sum().item<double>() == 0.0);
  CHECK(grad[1].slice(0, 1, 3).abs().sum().item<double>() == 0.0);
  CHECK(grad[0][0].abs().sum().item<double>() > 0.0);
}

TEST_CASE("epsilon 0 is plain NLL, the smoothing matches torch's cross_entropy", "[train][loss]") {
  torch::manual_seed(6);
  const at::Tensor logits = at::randn({3, 4, 9});
  const at::Tensor target = at::randint(0, 9, {3, 4}, at::kLong);
  target[2][3] = kPad;
  const at::Tensor flat_logits = logits.view({-1, 9});
  const at::Tensor flat_target = target.view({-1});
  const auto torch_ce = [&](double eps) {
    return at::cross_entropy_loss(flat_logits, flat_target, {}, at::Reduction::Sum, kPad, eps)
        .item<double>();
  };
  const LossSums plain = label_smoothed_cross_entropy(logits, target, 0.0, kPad);
  CHECK(plain.loss.item<double>() == plain.nll.item<double>());
  CHECK(plain.loss.item<double>() == Approx(torch_ce(0.0)).epsilon(1e-6));
  const LossSums smoothed = label_smoothed_cross_entropy(logits, target, 0.2, kPad);
  CHECK(smoothed.loss.item<double>() == Approx(torch_ce(0.2)).epsilon(1e-6));
  CHECK(smoothed.nll.item<double>() == Approx(plain.nll.item<double>()));
  CHECK(smoothed.loss.item<double>() != Approx(plain.loss.item<double>()));
}

TEST_CASE("half-precision logits are reduced in float32", "[train][loss]") {
  torch::manual_seed(7);
  const at::Tensor logits = at::randn({2, 5, 11}).to(at::kBFloat16);
  const at::Tensor target = at::randint(2, 11, {2, 5}, at::kLong);
  const LossSums s = label_smoothed_cross_entropy(logits, target, 0.1, kPad);
  CHECK(s.loss.scalar_type() == at::kFloat);
  CHECK(s.nll.scalar_type() == at::kFloat);
  CHECK(s.tokens.scalar_type() == at::kLong);
  const LossSums f = label_smoothed_cross_entropy(logits.to(at::kFloat), target, 0.1, kPad);
  CHECK(s.loss.item<double>() == Approx(f.loss.item<double>()).epsilon(1e-6));
}

TEST_CASE("the gradient computed with the loss equals autograd's through log_softmax",
          "[train][loss]") {
  torch::manual_seed(8);
  for (double eps : {0.0, 0.1}) {
    INFO("epsilon " << eps);
    at::Tensor logits = at::randn({3, 4, 13}).requires_grad_(true);
    at::Tensor target = at::randint(2, 13, {3, 4}, at::kLong);
    target[1][3] = kPad;
    target[2][0] = kPad;
    const LossSums s = label_smoothed_cross_entropy(logits, target, eps, kPad);
    (s.loss * 0.37).backward();
    // The textbook composite, differentiated by autograd.
    at::Tensor same = logits.detach().clone().requires_grad_(true);
    const at::Tensor lp = at::log_softmax(same, -1);
    const at::Tensor keep = target.ne(kPad);
    const at::Tensor nll = -lp.gather(-1, at::where(keep, target, at::zeros_like(target)).unsqueeze(-1)).squeeze(-1);
    const at::Tensor smooth = -lp.sum(-1);
    const at::Tensor loss = ((1 - eps) * nll + eps / 13.0 * smooth).masked_fill(keep.logical_not(), 0.0).sum();
    (loss * 0.37).backward();
    CHECK(s.loss.item<double>() == Approx(loss.item<double>()).epsilon(1e-6));
    CHECK(at::allclose(logits.grad(), same.grad(), 1e-5, 1e-7));
    CHECK(logits.grad()[1][3].abs().sum().item<double>() == 0.0);
  }
  // bfloat16 logits get a bfloat16 gradient.
  at::Tensor half = at::randn({2, 3, 7}).to(at::kBFloat16).requires_grad_(true);
  label_smoothed_cross_entropy(half, at::randint(2, 7, {2, 3}, at::kLong), 0.1, kPad).loss.backward();
  CHECK(half.grad().scalar_type() == at::kBFloat16);
}
