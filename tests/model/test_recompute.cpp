#include "catch_torch.h"  // first: see the header
#include "skip.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/utils.h>

#include "model/recompute.h"
#include "model/transformer.h"
#include "util/error.h"

using nmt::model::DecoderState;
using nmt::model::EncoderOutput;
using nmt::model::ModelOptions;
using nmt::model::NormPosition;
using nmt::model::Transformer;

namespace {

constexpr int64_t kPad = 1;
constexpr int64_t kVocab = 13;

/// 2 + 2 layers, d_model 32, every dropout 0.1: small, with random draws in every sublayer.
ModelOptions small_options(NormPosition norm) {
  ModelOptions o;
  o.encoder_layers = 2;
  o.decoder_layers = 2;
  o.d_model = 32;
  o.heads = 4;
  o.ffn_dim = 64;
  o.dropout = 0.1;
  o.attention_dropout = 0.1;
  o.activation_dropout = 0.1;
  o.norm = norm;
  o.max_positions = 32;
  return o;
}

Transformer make_model(NormPosition norm) {
  torch::manual_seed(3);
  Transformer model(small_options(norm), kVocab, kVocab, kPad);
  model->train();
  return model;
}

at::Tensor ids(std::vector<int64_t> values, int64_t rows) {
  return at::tensor(values, at::kLong).view({rows, -1});
}

// Right-padded; the target starts with BOS (2) and ends with EOS (3).
at::Tensor source() { return ids({5, 6, 7, 8, 9, 10, kPad, kPad, 11, 12, 4, 3, 5, 6, 7, 8}, 2); }
at::Tensor target_in() { return ids({2, 4, 5, 6, 7, 8, 2, 9, 10, 11, kPad, kPad}, 2); }
at::Tensor target_out() { return ids({4, 5, 6, 7, 8, 3, 9, 10, 11, 3, kPad, kPad}, 2); }

/// Token-mean cross-entropy of a teacher-forced forward, from generator seed 11.
at::Tensor loss_of(Transformer& model) {
  torch::manual_seed(11);
  const at::Tensor logits = model->forward(source(), target_in());
  return at::cross_entropy_loss(logits.reshape({-1, kVocab}), target_out().reshape(-1), {},
                                at::Reduction::Mean, kPad);
}

/// The loss, each parameter's gradient (in parameters() order) and the next CPU draw after
/// forward and backward, for one setting of activation checkpointing.
struct Pass {
  at::Tensor loss;
  std::vector<at::Tensor> grads;
  at::Tensor next_draw;
};

Pass run_pass(Transformer& model, bool checkpointing) {
  model->zero_grad();
  model->set_activation_checkpointing(checkpointing);
  Pass pass;
  pass.loss = loss_of(model);
  pass.loss.backward();
  for (const at::Tensor& p : model->parameters()) pass.grads.push_back(p.grad().clone());
  pass.next_draw = at::rand({4});
  return pass;
}

/// max |a - b| / max |b| over one gradient (0 for two zero tensors).
double relative_difference(const at::Tensor& a, const at::Tensor& b) {
  const double scale = b.abs().max().item<double>();
  const double diff = (a - b).abs().max().item<double>();
  return scale > 0 ? diff / scale : diff;
}

/// The autograd nodes reachable from t's grad_fn, each counted once.
std::vector<torch::autograd::Node*> graph_nodes(const at::Tensor& t) {
  std::vector<torch::autograd::Node*> order;
  std::set<torch::autograd::Node*> seen;
  std::vector<torch::autograd::Node*> stack{t.grad_fn().get()};
  while (!stack.empty()) {
    torch::autograd::Node* node = stack.back();
    stack.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    order.push_back(node);
    for (const torch::autograd::Edge& e : node->next_edges()) stack.push_back(e.function.get());
  }
  return order;
}

size_t recompute_nodes(const std::vector<torch::autograd::Node*>& nodes) {
  size_t count = 0;
  for (torch::autograd::Node* node : nodes) {
    if (node->name().find("RecomputeFunction") != std::string::npos) ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("recompute: loss and gradients equal those without activation checkpointing",
          "[model][recompute]") {
  for (NormPosition norm : {NormPosition::kPost, NormPosition::kPre}) {
    INFO((norm == NormPosition::kPre ? "pre-norm" : "post-norm"));
    Transformer model = make_model(norm);
    const Pass plain = run_pass(model, false);
    const Pass recomputed = run_pass(model, true);
    // Dropout is live: a forward from another seed gives another loss, so a recompute that
    // drew other masks would show in the gradients.
    at::NoGradGuard no_grad;
    torch::manual_seed(11);
    const at::Tensor seed11 = model->forward(source(), target_in());
    torch::manual_seed(12);
    CHECK_FALSE(at::equal(seed11, model->forward(source(), target_in())));

    // Same kernels on the same inputs with the same masks: equal to the last bit here; the
    // bound leaves room for a kernel that picks another reduction order in its second run.
    CHECK(recomputed.loss.item<float>() == plain.loss.item<float>());
    REQUIRE(recomputed.grads.size() == plain.grads.size());
    double worst = 0;
    for (size_t i = 0; i < plain.grads.size(); ++i) {
      worst = std::max(worst, relative_difference(recomputed.grads[i], plain.grads[i]));
    }
    CAPTURE(worst);
    CHECK(worst <= 1e-6);
    // Backward drew nothing: the generator continues as it would without checkpointing.
    CHECK(at::equal(recomputed.next_draw, plain.next_draw));
  }
}

TEST_CASE("recompute: the graph keeps one node per layer instead of the layers' activations",
          "[model][recompute]") {
  Transformer model = make_model(NormPosition::kPre);
  model->set_activation_checkpointing(false);
  const size_t plain = graph_nodes(loss_of(model)).size();
  model->set_activation_checkpointing(true);
  const at::Tensor loss = loss_of(model);  // holds the graph that nodes point into
  const std::vector<torch::autograd::Node*> nodes = graph_nodes(loss);
  CAPTURE(plain, nodes.size());
  CHECK(recompute_nodes(nodes) == 4);  // 2 encoder + 2 decoder layers
  // Each layer's own nodes (about 40 with their parameters' accumulators) collapse into one
  // node and the accumulators it feeds.
  CHECK(nodes.size() * 2 < plain);
}

namespace {

/// Counts an AccumulateGrad node's runs and, like the gradient reducer's hook, queues one
/// callback at the end of the backward that runs it.
class CountingHook : public torch::autograd::FunctionPostHook {
 public:
  CountingHook(int* runs, std::function<void()> on_run) : runs_(runs), on_run_(std::move(on_run)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    ++*runs_;
    on_run_();
    return outputs;
  }

 private:
  int* runs_;
  std::function<void()> on_run_;
};

}  // namespace

TEST_CASE("recompute: every parameter's accumulator runs once, in the outer backward",
          "[model][recompute]") {
  Transformer model = make_model(NormPosition::kPost);
  model->set_activation_checkpointing(true);
  const std::vector<at::Tensor> params = model->parameters();
  std::vector<int> runs(params.size(), 0);
  int total_at_end = -1;
  bool queued = false;
  const auto queue_end = [&] {
    if (queued) return;
    queued = true;
    // A hook run in a nested backward would queue this in that backward's task, which ends
    // before the outer one has delivered the other gradients.
    torch::autograd::Engine::get_default_engine().queue_callback([&] {
      total_at_end = 0;
      for (int r : runs) total_at_end += r;
    });
  };
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  for (size_t i = 0; i < params.size(); ++i) {
    accumulators.push_back(torch::autograd::impl::grad_accumulator(params[i]));
    REQUIRE(accumulators.back());
    accumulators.back()->add_post_hook(std::make_unique<CountingHook>(&runs[i], queue_end));
  }
  for (int pass = 1; pass <= 2; ++pass) {
    INFO("backward " << pass);
    queued = false;
    total_at_end = -1;
    loss_of(model).backward();
    for (size_t i = 0; i < params.size(); ++i) {
      INFO("parameter " << i);
      CHECK(runs[i] == pass);
    }
    CHECK(total_at_end == pass * static_cast<int>(params.size()));
  }
}

TEST_CASE("recompute: eval mode and no-grad decoding are untouched", "[model][recompute]") {
  Transformer model = make_model(NormPosition::kPre);
  model->eval();
  model->set_activation_checkpointing(false);
  const at::Tensor plain = model->forward(source(), target_in());
  const size_t plain_nodes = graph_nodes(plain).size();
  model->set_activation_checkpointing(true);
  const at::Tensor eval_logits = model->forward(source(), target_in());
  CHECK(at::equal(eval_logits, plain));
  const std::vector<torch::autograd::Node*> nodes = graph_nodes(eval_logits);
  CHECK(recompute_nodes(nodes) == 0);
  CHECK(nodes.size() == plain_nodes);

  // Training mode without grad (e.g. measuring a forward): no recompute, no error.
  model->train();
  at::NoGradGuard no_grad;
  torch::manual_seed(5);
  const at::Tensor on = model->forward(source(), target_in());
  CHECK_FALSE(on.requires_grad());
  model->set_activation_checkpointing(false);
  torch::manual_seed(5);
  CHECK(at::equal(on, model->forward(source(), target_in())));

  // Incremental decoding (eval, no grad) with it on gives the same logits.
  model->eval();
  model->set_activation_checkpointing(true);
  const EncoderOutput enc = model->encode(source());
  DecoderState state = model->init_state(enc);
  const at::Tensor step = model->decode_step(target_in().select(1, 0), state);
  CHECK(at::allclose(step, plain.select(1, 0), 1e-5, 1e-5));
}

TEST_CASE("recompute: at::dropout's masks and the input and parameter gradients replay",
          "[model][recompute]") {
  // at::dropout (LibTorch's, drawn with bernoulli_ from the default generator), not ours.
  torch::manual_seed(1);
  const at::Tensor weight = at::randn({8, 8}).requires_grad_();
  const at::Tensor x0 = at::randn({4, 8}).requires_grad_();
  const auto block = [&](const std::vector<at::Tensor>& in) {
    return at::dropout(at::tanh(at::linear(in[0], weight)), 0.5, /*train=*/true);
  };
  const auto gradients = [&](bool recompute) {
    weight.mutable_grad() = at::Tensor();
    x0.mutable_grad() = at::Tensor();
    torch::manual_seed(9);
    const at::Tensor x = x0 * 2;  // a non-leaf input, as between layers
    const at::Tensor y =
        recompute ? nmt::model::recompute_in_backward(block, {x}, {weight}) : block({x});
    (y * y).sum().backward();
    return std::make_pair(weight.grad().clone(), x0.grad().clone());
  };
  const auto [w_plain, x_plain] = gradients(false);
  const auto [w_recomputed, x_recomputed] = gradients(true);
  CHECK(relative_difference(w_recomputed, w_plain) <= 1e-6);
  CHECK(relative_difference(x_recomputed, x_plain) <= 1e-6);

  at::NoGradGuard no_grad;
  CHECK_THROWS_AS(nmt::model::recompute_in_backward(block, {x0}, {weight}), nmt::Error);
}

TEST_CASE("recompute: the recompute runs under the forward's autocast state",
          "[model][recompute]") {
  // bf16 autocast on CPU around the forward only; backward runs outside it, as in training.
  Transformer model = make_model(NormPosition::kPost);
  const auto pass = [&](bool checkpointing) {
    model->zero_grad();
    model->set_activation_checkpointing(checkpointing);
    at::autocast::set_autocast_enabled(at::kCPU, true);
    at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
    at::autocast::increment_nesting();
    const at::Tensor loss = loss_of(model);
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(at::kCPU, false);
    loss.backward();
    std::vector<at::Tensor> grads;
    for (const at::Tensor& p : model->parameters()) grads.push_back(p.grad().clone());
    return grads;
  };
  const std::vector<at::Tensor> plain = pass(false);
  const std::vector<at::Tensor> recomputed = pass(true);
  double worst = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    worst = std::max(worst, relative_difference(recomputed[i], plain[i]));
  }
  CAPTURE(worst);
  // A recompute in float32 would differ by bf16's rounding (about 1e-2), not by 1e-6.
  CHECK(worst <= 1e-6);
}

TEST_CASE("recompute: on a GPU, CUDA dropout masks replay", "[model][recompute][cuda]") {
  if (!at::hasCUDA() || at::getNumGPUs() == 0) {
    NMT_SKIP_WITHOUT_CUDA("no CUDA device visible");
  }
  Transformer model = make_model(NormPosition::kPre);
  model->to(at::kCUDA);
  const auto pass = [&](bool checkpointing) {
    model->zero_grad();
    model->set_activation_checkpointing(checkpointing);
    torch::manual_seed(11);  // seeds the CUDA generators too
    const at::Tensor logits = model->forward(source().cuda(), target_in().cuda());
    at::cross_entropy_loss(logits.reshape({-1, kVocab}), target_out().cuda().reshape(-1), {},
                           at::Reduction::Mean, kPad)
        .backward();
    std::vector<at::Tensor> grads;
    for (const at::Tensor& p : model->parameters()) grads.push_back(p.grad().cpu());
    return std::make_pair(grads, at::rand({4}, at::kCUDA).cpu());
  };
  const auto [plain, plain_next] = pass(false);
  const auto [recomputed, recomputed_next] = pass(true);
  double worst = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    worst = std::max(worst, relative_difference(recomputed[i], plain[i]));
  }
  CAPTURE(worst);
  CHECK(worst <= 1e-5);
  CHECK(at::equal(recomputed_next, plain_next));
}
