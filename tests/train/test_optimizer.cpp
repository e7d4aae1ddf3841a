#include "catch_torch.h"  // first: see the header
#include "skip.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "train/grad_utils.h"
#include "train/optimizer.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::train::AdamOptimizer;
using nmt::train::NamedTensors;
using nmt::train::TrainOptions;

namespace {

TrainOptions adam_options(nmt::train::Optimizer kind, double weight_decay) {
  TrainOptions o;
  o.optimizer = kind;
  o.adam_beta1 = 0.9;
  o.adam_beta2 = 0.999;
  o.adam_eps = 1e-8;
  o.weight_decay = weight_decay;
  return o;
}

/// A leaf parameter holding `values`.
at::Tensor param(std::vector<float> values) { return at::tensor(values).requires_grad_(true); }

void set_grad(const at::Tensor& p, std::vector<float> values) {
  p.mutable_grad() = at::tensor(values).view(p.sizes());
}

std::vector<double> values(const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kDouble).contiguous();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

/// Reference Adam in double precision, per element, step t (1-based):
///   Adam:  g += wd * p                      AdamW: p *= 1 - lr * wd
///   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
///   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
struct ReferenceAdam {
  TrainOptions o;
  std::vector<double> p, m, v;
  int t = 0;
  void step(std::vector<double> g, double lr) {
    ++t;
    const bool decoupled = o.optimizer == nmt::train::Optimizer::kAdamW;
    for (size_t i = 0; i < p.size(); ++i) {
      if (decoupled) {
        p[i] *= 1 - lr * o.weight_decay;
      } else {
        g[i] += o.weight_decay * p[i];
      }
      m[i] = o.adam_beta1 * m[i] + (1 - o.adam_beta1) * g[i];
      v[i] = o.adam_beta2 * v[i] + (1 - o.adam_beta2) * g[i] * g[i];
      const double m_hat = m[i] / (1 - std::pow(o.adam_beta1, t));
      const double v_hat = v[i] / (1 - std::pow(o.adam_beta2, t));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + o.adam_eps);
    }
  }
};

void check_close(const at::Tensor& t, const std::vector<double>& expected) {
  const std::vector<double> got = values(t);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(expected[i]).epsilon(1e-6).margin(1e-7));
  }
}

std::map<std::string, at::Tensor> to_map(const NamedTensors& named) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : named) out[name] = t;
  return out;
}

}  // namespace

TEST_CASE("one Adam step matches the hand-computed update", "[train][optimizer]") {
  // Step 1: m = 0.1 g, v = 0.001 g^2, so m_hat = g, v_hat = g^2 and
  // p -= lr * g / (|g| + eps) = lr * sign(g) (up to eps): (1, -2) -> (0.9, -1.9).
  const TrainOptions o = adam_options(nmt::train::Optimizer::kAdam, 0.0);
  const at::Tensor p = param({1.0f, -2.0f});
  AdamOptimizer opt({{"p", p}}, o);
  set_grad(p, {0.5f, -1.0f});
  opt.step(0.1);
  check_close(p, {0.9, -1.9});
  // Step 2 with g = (0.25, 0.5): against the double-precision reference.
  ReferenceAdam ref{o, {1.0, -2.0}, {0, 0}, {0, 0}};
  ref.step({0.5, -1.0}, 0.1);
  set_grad(p, {0.25f, 0.5f});
  opt.step(0.05);
  ref.step({0.25, 0.5}, 0.05);
  check_close(p, ref.p);
  const auto state = to_map(opt.state());
  check_close(state.at("exp_avg.p"), ref.m);
  check_close(state.at("exp_avg_sq.p"), ref.v);
  CHECK(state.at("step.p").item<double>() == 2.0);
}

TEST_CASE("AdamW decays decoupled, Adam's L2 goes through the moments", "[train][optimizer]") {
  // wd = 0.1, lr = 0.1, g = (0.5, -1), p = (1, -2). On step 1 Adam normalizes g + wd p,
  // whose signs equal g's, so L2 vanishes: p = (0.9, -1.9). AdamW first shrinks p by
  // 1 - lr wd = 0.99: p = (0.99 - 0.1, -1.98 + 0.1) = (0.89, -1.88).
  const TrainOptions adam = adam_options(nmt::train::Optimizer::kAdam, 0.1);
  const TrainOptions adamw = adam_options(nmt::train::Optimizer::kAdamW, 0.1);
  const at::Tensor p1 = param({1.0f, -2.0f});
  const at::Tensor p2 = param({1.0f, -2.0f});
  AdamOptimizer opt1({{"p", p1}}, adam);
  AdamOptimizer opt2({{"p", p2}}, adamw);
  ReferenceAdam ref1{adam, {1.0, -2.0}, {0, 0}, {0, 0}};
  ReferenceAdam ref2{adamw, {1.0, -2.0}, {0, 0}, {0, 0}};
  set_grad(p1, {0.5f, -1.0f});
  set_grad(p2, {0.5f, -1.0f});
  opt1.step(0.1);
  opt2.step(0.1);
  ref1.step({0.5, -1.0}, 0.1);
  ref2.step({0.5, -1.0}, 0.1);
  check_close(p1, {0.9, -1.9});
  check_close(p2, {0.89, -1.88});
  // Step 2: the L2 term now changes the moments (Adam), not a plain shrink (AdamW).
  set_grad(p1, {0.25f, 0.5f});
  set_grad(p2, {0.25f, 0.5f});
  opt1.step(0.1);
  opt2.step(0.1);
  ref1.step({0.25, 0.5}, 0.1);
  ref2.step({0.25, 0.5}, 0.1);
  check_close(p1, ref1.p);
  check_close(p2, ref2.p);
  CHECK(std::abs(values(p1)[0] - values(p2)[0]) > 1e-3);
}

TEST_CASE("found_inf = 1 changes neither parameters nor moments nor step counts",
          "[train][optimizer]") {
  const TrainOptions o = adam_options(nmt::train::Optimizer::kAdamW, 0.1);
  const at::Tensor p = param({1.0f, -2.0f});
  AdamOptimizer opt({{"p", p}}, o);
  set_grad(p, {0.5f, -1.0f});
  const at::Tensor found_inf = at::ones({1});
  const at::Tensor before = p.detach().clone();
  opt.step(0.1, &found_inf);
  opt.step(0.1, &found_inf);
  CHECK(at::equal(p.detach(), before));
  for (const auto& [name, t] : opt.state()) {
    INFO(name);
    CHECK(at::equal(t, at::zeros_like(t)));
  }
  // The next good step is a first step (bias correction with t = 1).
  const at::Tensor ok = at::zeros({1});
  opt.step(0.1, &ok);
  check_close(p, {0.89, -1.88});
  CHECK(to_map(opt.state()).at("step.p").item<double>() == 1.0);
}

TEST_CASE("plain SGD steps by lr x gradient (with weight decay), and skips on found_inf",
          "[train][optimizer]") {
  const TrainOptions o = adam_options(nmt::train::Optimizer::kSgd, 0.1);
  const at::Tensor p = param({1.0f, -2.0f});
  nmt::train::SgdOptimizer opt({{"p", p}}, o);
  set_grad(p, {0.5f, -1.0f});
  const at::Tensor found_inf = at::ones({1});
  opt.step(0.1, &found_inf);
  check_close(p, {1.0, -2.0});
  const at::Tensor ok = at::zeros({1});
  opt.step(0.1, &ok);
  // p -= 0.1 * (g + 0.1 p): 1 - 0.1 * (0.5 + 0.1) = 0.94; -2 - 0.1 * (-1 - 0.2) = -1.88.
  check_close(p, {0.94, -1.88});
  // Twice the gradient moves twice as far: the scale shows, as it does not with Adam.
  set_grad(p, {1.0f, -2.0f});
  opt.step(0.1);
  check_close(p, {0.94 - 0.1 * (1.0 + 0.094), -1.88 - 0.1 * (-2.0 - 0.188)});
}

TEST_CASE("make_optimizer builds what train.optimizer names and SGD keeps no state",
          "[train][optimizer]") {
  const auto build = [](nmt::train::Optimizer which) {
    return nmt::train::make_optimizer({{"p", param({1.0f, -2.0f})}},
                                      adam_options(which, 0.1));
  };
  const auto sgd = build(nmt::train::Optimizer::kSgd);
  CHECK(dynamic_cast<nmt::train::SgdOptimizer*>(sgd.get()) != nullptr);
  CHECK(sgd->state().empty());
  // An Adam run's moments in the checkpoint are ignored, not an error.
  const at::Tensor moment = at::ones({2});
  sgd->load_state([&](std::string_view) { return &moment; });
  CHECK(dynamic_cast<AdamOptimizer*>(build(nmt::train::Optimizer::kAdam).get()) != nullptr);
  const auto adamw = build(nmt::train::Optimizer::kAdamW);
  CHECK(dynamic_cast<AdamOptimizer*>(adamw.get()) != nullptr);
  CHECK(adamw->state().size() == 3);
  CHECK_THROWS_WITH(AdamOptimizer({{"p", param({1.0f})}},
                                  adam_options(nmt::train::Optimizer::kSgd, 0.1)),
                    Contains("sgd"));
}

TEST_CASE("optimizer state round trip continues bitwise identically", "[train][optimizer]") {
  const TrainOptions o = adam_options(nmt::train::Optimizer::kAdamW, 0.01);
  const auto make = [] {
    return NamedTensors{{"w", at::sin(at::arange(6, at::kFloat)).view({3, 2}).requires_grad_()},
                        {"b", at::cos(at::arange(2, at::kFloat)).requires_grad_()}};
  };
  const auto grads_at = [](int k, const NamedTensors& params) {
    for (const auto& [name, p] : params) {
      p.mutable_grad() = at::sin(at::arange(p.numel(), at::kFloat) * k + 0.3).view(p.sizes());
    }
  };
  const NamedTensors params = make();
  AdamOptimizer uninterrupted(params, o);
  for (int k = 1; k <= 3; ++k) {
    grads_at(k, params);
    uninterrupted.step(1e-2 * k);
  }
  const auto saved = to_map(uninterrupted.state());
  REQUIRE(saved.size() == 6);
  const auto find = [&](std::string_view name) -> const at::Tensor* {
    auto it = saved.find(std::string(name));
    return it == saved.end() ? nullptr : &it->second;
  };

  NamedTensors copies;
  for (const auto& [name, p] : params)
    copies.emplace_back(name, p.detach().clone().requires_grad_());
  AdamOptimizer resumed(copies, o);
  resumed.load_state(find);
  grads_at(4, params);
  grads_at(4, copies);
  uninterrupted.step(0.04);
  resumed.step(0.04);
  for (size_t i = 0; i < params.size(); ++i) {
    INFO(params[i].first);
    CHECK(at::equal(params[i].second.detach(), copies[i].second.detach()));
  }
  const auto a = to_map(uninterrupted.state());
  const auto b = to_map(resumed.state());
  for (const auto& [name, t] : a) {
    INFO(name);
    CHECK(at::equal(t, b.at(name)));
  }
}

TEST_CASE("optimizer load_state names a missing or misshapen tensor", "[train][optimizer]") {
  const TrainOptions o = adam_options(nmt::train::Optimizer::kAdam, 0.0);
  AdamOptimizer opt({{"w", at::zeros({3, 2}).requires_grad_()}}, o);
  std::map<std::string, at::Tensor> saved = to_map(opt.state());
  saved["exp_avg_sq.w"] = at::ones({3, 2});
  saved["exp_avg.w"] = at::ones({2, 3});
  const auto find = [&](std::string_view name) -> const at::Tensor* {
    auto it = saved.find(std::string(name));
    return it == saved.end() ? nullptr : &it->second;
  };
  CHECK_THROWS_AS(opt.load_state(find), nmt::CheckpointError);
  CHECK_THROWS_WITH(opt.load_state(find),
                    Contains("optim.exp_avg.w") && Contains("expected shape [3, 2], found [2, 3]"));
  // Nothing was copied, not even the tensors that matched.
  CHECK(at::equal(to_map(opt.state()).at("exp_avg_sq.w"), at::zeros({3, 2})));
  saved.erase("step.w");
  saved["exp_avg.w"] = at::ones({3, 2});
  CHECK_THROWS_WITH(opt.load_state(find), Contains("optim.step.w") && Contains("missing"));
}

TEST_CASE("zero_grad, accumulation and parameters without gradients", "[train][optimizer]") {
  const TrainOptions o = adam_options(nmt::train::Optimizer::kAdam, 0.0);
  const at::Tensor used = param({1.0f, 2.0f});
  const at::Tensor unused = param({3.0f});
  AdamOptimizer opt({{"used", used}, {"unused", unused}}, o);
  // Two micro-batches accumulate: d/dp sum(p^2) twice = 4 p.
  (used * used).sum().backward();
  (used * used).sum().backward();
  CHECK(at::equal(used.grad(), at::tensor({4.0f, 8.0f})));
  REQUIRE(opt.grads().size() == 1);
  opt.step(0.1);
  CHECK(at::equal(unused.detach(), at::tensor({3.0f})));
  const auto state = to_map(opt.state());
  CHECK(state.at("step.used").item<double>() == 1.0);
  CHECK(state.at("step.unused").item<double>() == 0.0);
  opt.zero_grad();
  CHECK_FALSE(used.grad().defined());
  CHECK(opt.grads().empty());
  (used * used).sum().backward();  // the first backward after zero_grad writes, not adds
  CHECK(at::equal(used.grad(), 2 * used.detach()));
}

TEST_CASE("optimizer rejects bad parameter lists", "[train][optimizer]") {
  const TrainOptions o;
  CHECK_THROWS_AS(AdamOptimizer({}, o), nmt::Error);
  CHECK_THROWS_WITH(AdamOptimizer({{"a", param({1.0f})}, {"a", param({2.0f})}}, o),
                    Contains("a appears twice"));
  CHECK_THROWS_AS(AdamOptimizer({{"i", at::ones({2}, at::kLong)}}, o), nmt::Error);
}

TEST_CASE("total gradient norm and clipping are exact", "[train][grad]") {
  using nmt::train::clip_grad_norm_;
  using nmt::train::total_grad_norm;
  const at::Tensor a = at::tensor({3.0f, 4.0f});
  const at::Tensor b = at::tensor({12.0f});
  // sqrt(3^2 + 4^2 + 12^2) = 13.
  const at::Tensor norm = total_grad_norm({a, b});
  CHECK(norm.scalar_type() == at::kFloat);
  CHECK(norm.dim() == 0);
  CHECK(norm.item<float>() == 13.0f);
  CHECK(total_grad_norm({}).item<float>() == 0.0f);

  std::vector<at::Tensor> grads = {a.clone(), b.clone()};
  CHECK(clip_grad_norm_(grads, 0.0).item<float>() == 13.0f);  // off: norm only
  CHECK(at::equal(grads[0], a));
  CHECK(clip_grad_norm_(grads, 100.0).item<float>() == 13.0f);  // under the limit: unchanged
  CHECK(at::equal(grads[0], a));
  CHECK(at::equal(grads[1], b));

  const at::Tensor pre = clip_grad_norm_(grads, 6.5);
  CHECK(pre.item<float>() == 13.0f);
  const at::Tensor coef = at::tensor(6.5f) / (at::tensor(13.0f) + 1e-6);
  CHECK(at::equal(grads[0], a * coef));
  CHECK(at::equal(grads[1], b * coef));
  CHECK(total_grad_norm(grads).item<double>() == Approx(6.5).epsilon(1e-6));

  // fp16 gradients: norms accumulate in float32 (300^2 overflows no float32 sum).
  const at::Tensor h = at::full({4}, 300.0, at::kHalf);
  CHECK(total_grad_norm({h}).item<float>() == 600.0f);
}

TEST_CASE("float and double parameters in one optimizer both follow Adam", "[train][optimizer]") {
  const TrainOptions o = adam_options(nmt::train::Optimizer::kAdamW, 0.1);
  const at::Tensor f = param({1.0f, -2.0f});
  const at::Tensor d = at::tensor({1.0, -2.0}, at::kDouble).requires_grad_(true);
  AdamOptimizer opt({{"f", f}, {"d", d}}, o);
  ReferenceAdam ref{o, {1.0, -2.0}, {0, 0}, {0, 0}};
  for (int k = 1; k <= 3; ++k) {
    const std::vector<double> g = {0.5 / k, 0.25 * k};
    set_grad(f, {static_cast<float>(g[0]), static_cast<float>(g[1])});
    d.mutable_grad() = at::tensor(g, at::kDouble);
    opt.step(0.1);
    ref.step(g, 0.1);
  }
  check_close(f, ref.p);
  check_close(d, ref.p);
}

TEST_CASE("on a GPU, fused Adam matches the CPU and skips on found_inf",
          "[train][optimizer][cuda]") {
  if (!at::hasCUDA() || at::getNumGPUs() == 0) {
    NMT_SKIP_WITHOUT_CUDA("no CUDA device visible");
  }
  const TrainOptions o = adam_options(nmt::train::Optimizer::kAdamW, 0.1);
  const at::Tensor p = param({1.0f, -2.0f, 0.5f});
  const at::Tensor q = p.detach().to(at::kCUDA).requires_grad_(true);
  AdamOptimizer cpu({{"p", p}}, o);
  AdamOptimizer gpu({{"p", q}}, o);
  const at::Tensor skip = at::ones({1}, at::kCUDA);
  const at::Tensor go = at::zeros({1}, at::kCUDA);
  for (int k = 1; k <= 3; ++k) {
    const at::Tensor g = at::sin(at::arange(3, at::kFloat) * k + 1);
    p.mutable_grad() = g;
    q.mutable_grad() = g.to(at::kCUDA);
    cpu.step(0.1);
    gpu.step(0.1, &go);
    gpu.step(0.1, &skip);  // changes nothing, step count included
  }
  CHECK(at::allclose(q.detach().cpu(), p.detach(), 1e-5, 1e-6));
  const auto a = to_map(cpu.state());
  const auto b = to_map(gpu.state());
  for (const auto& [name, t] : a) {
    INFO(name);
    CHECK(b.at(name).is_cpu());
    CHECK(at::allclose(b.at(name), t, 1e-5, 1e-7));
  }
  // Clipping on the device.
  std::vector<at::Tensor> grads = {at::tensor({3.0f, 4.0f}, at::kCUDA),
                                   at::full({1}, 12.0, at::kCUDA)};
  CHECK(nmt::train::clip_grad_norm_(grads, 6.5).item<float>() == 13.0f);
  CHECK(nmt::train::total_grad_norm(grads).item<double>() == Approx(6.5).epsilon(1e-6));
}
