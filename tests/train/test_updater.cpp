// Updater: one optimizer update of a tiny Transformer on CPU (no dropout, plain SGD, so that
// a step can be checked against its gradient).
#include "catch_torch.h"

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "data/batch_tensors.h"
#include "model/transformer.h"
#include "train/updater.h"

using nmt::train::IntervalStats;
using nmt::train::Updater;
using nmt::train::UpdaterSetup;

namespace {

constexpr int64_t kVocab = 24;
constexpr int64_t kBos = 2;

/// A 1+1-layer model of width 16, SGD at a constant learning rate of 0.5, no dropout.
UpdaterSetup tiny_setup(int64_t update_freq = 1, int64_t seed = 1) {
  UpdaterSetup u;
  u.model.encoder_layers = 1;
  u.model.decoder_layers = 1;
  u.model.d_model = 16;
  u.model.heads = 2;
  u.model.ffn_dim = 32;
  u.model.dropout = 0.0;
  u.model.max_positions = 32;
  u.train.optimizer = nmt::train::Optimizer::kSgd;
  u.train.schedule = nmt::train::LrSchedule::kConstant;
  u.train.lr = 0.5;
  u.train.warmup_steps = 0;
  u.train.seed = seed;
  u.src_vocab_size = kVocab;
  u.tgt_vocab_size = kVocab;
  u.pad_id = 0;
  u.update_freq = update_freq;
  return u;
}

/// Rows [first, first + count) of a batch, as a batch of this rank's own.
nmt::data::BatchTensors rows(const nmt::data::BatchTensors& b, int64_t first, int64_t count) {
  nmt::data::BatchTensors r;
  r.src = b.src.narrow(0, first, count);
  r.tgt_in = b.tgt_in.narrow(0, first, count);
  r.tgt_out = b.tgt_out.narrow(0, first, count);
  r.src_tokens = count * b.src.size(1);
  r.tgt_tokens = count * b.tgt_out.size(1);
  r.src_lengths.assign(static_cast<size_t>(count), b.src.size(1));
  r.tgt_lengths.assign(static_cast<size_t>(count), b.tgt_out.size(1));
  r.global_tgt_tokens = r.tgt_tokens;
  r.epoch = 1;
  return r;
}

nmt::data::BatchTensors batch_of(int64_t sentences) {
  return nmt::data::random_batch(sentences, 6, kVocab, kVocab, kBos);
}

/// A source that yields `batches` in turn and counts the calls.
nmt::train::BatchSource source(std::vector<nmt::data::BatchTensors> batches, int* calls) {
  return [batches = std::move(batches), calls]() mutable {
    return batches[static_cast<size_t>((*calls)++) % batches.size()];
  };
}

std::vector<at::Tensor> parameters(Updater& u) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : u.model()->parameters()) out.push_back(p.detach().clone());
  return out;
}

std::vector<at::Tensor> gradients(Updater& u) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : u.model()->parameters())
    out.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
  return out;
}

bool all_close(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, double rtol,
               double atol) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (!at::allclose(a[i], b[i], rtol, atol)) return false;
  return true;
}

}  // namespace

TEST_CASE("Updaters of one seed start from the same parameters, of another seed not", "[train]") {
  Updater a(tiny_setup()), b(tiny_setup()), c(tiny_setup(1, /*seed=*/2));
  CHECK(all_close(parameters(a), parameters(b), 0, 0));
  CHECK_FALSE(all_close(parameters(a), parameters(c), 1e-3, 1e-3));
}

TEST_CASE("one update steps every parameter by -lr x its gradient (SGD) and counts the batch",
          "[train]") {
  Updater u(tiny_setup());
  const std::vector<at::Tensor> before = parameters(u);
  int calls = 0;
  IntervalStats interval = IntervalStats::zero(c10::Device(c10::kCPU));
  const nmt::train::UpdatePosition at = u.update(1, source({batch_of(4)}, &calls), interval, true);
  CHECK(calls == 1);
  CHECK(at.epoch == 1);
  CHECK(interval.updates == 1);
  CHECK(interval.tgt_tokens == 24);
  CHECK(interval.loss_sum.item<double>() > 0);
  CHECK(u.last_grad_norm().item<double>() > 0);
  const std::vector<at::Tensor> after = parameters(u), grads = gradients(u);
  int64_t moved = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    REQUIRE(grads[i].defined());
    CHECK(at::allclose(after[i], before[i] - 0.5 * grads[i], 1e-5, 1e-6));
    if (!at::equal(after[i], before[i])) ++moved;
  }
  // Every parameter tensor learns from the batch.
  CHECK(moved == static_cast<int64_t>(after.size()));
}

TEST_CASE("zero_grad clears the gradients that forward_backward leaves, without a step",
          "[train]") {
  Updater u(tiny_setup());
  const std::vector<at::Tensor> before = parameters(u);
  u.forward_backward(batch_of(3));
  for (const at::Tensor& g : gradients(u)) CHECK(g.defined());
  CHECK(all_close(parameters(u), before, 0, 0));  // no optimizer step
  u.zero_grad();
  for (const at::Tensor& g : gradients(u)) CHECK_FALSE(g.defined());
}

TEST_CASE("update_freq 2 over two halves of a batch equals update_freq 1 over the whole",
          "[train]") {
  const nmt::data::BatchTensors whole = batch_of(4);
  Updater accumulated(tiny_setup(/*update_freq=*/2)), single(tiny_setup(1)), half(tiny_setup(1));
  int calls_accumulated = 0, calls_single = 0, calls_half = 0;
  IntervalStats interval = IntervalStats::zero(c10::Device(c10::kCPU));
  accumulated.update(1, source({rows(whole, 0, 2), rows(whole, 2, 2)}, &calls_accumulated),
                     interval, false);
  single.update(1, source({whole}, &calls_single), interval, false);
  half.update(1, source({rows(whole, 0, 2)}, &calls_half), interval, false);
  CHECK(calls_accumulated == 2);
  CHECK(calls_single == 1);
  // The loss is a sum over tokens divided by the update's tokens: the split does not matter.
  CHECK(all_close(gradients(accumulated), gradients(single), 1e-4, 1e-6));
  CHECK(all_close(parameters(accumulated), parameters(single), 1e-4, 1e-6));
  // ... while half the batch is another update: the comparison can tell.
  CHECK_FALSE(all_close(gradients(half), gradients(single), 1e-4, 1e-6));
}

TEST_CASE("a frozen output bias is never stepped, and the other parameters are", "[train]") {
  // transformers keeps MarianMT's final_logits_bias fixed (a buffer); before
  // model.freeze_output_bias, fine-tuning an import trained it. AdamW, whose weight decay would
  // move even a parameter without gradient.
  UpdaterSetup setup = tiny_setup();
  setup.model.output_bias = true;
  setup.model.freeze_output_bias = true;
  setup.train.optimizer = nmt::train::Optimizer::kAdamW;
  setup.train.weight_decay = 0.1;
  Updater u(setup);
  at::Tensor bias;
  for (const auto& item : u.model()->named_parameters())
    if (item.key() == "output_bias") bias = item.value();
  REQUIRE(bias.defined());
  {
    at::NoGradGuard no_grad;
    bias.fill_(0.25);
  }
  const std::vector<at::Tensor> before = parameters(u);
  int calls = 0;
  IntervalStats interval = IntervalStats::zero(c10::Device(c10::kCPU));
  u.update(1, source({batch_of(4)}, &calls), interval, true);
  CHECK(at::equal(bias, at::full({kVocab}, 0.25)));
  const std::vector<at::Tensor> after = parameters(u);
  int64_t moved = 0;
  for (size_t i = 0; i < after.size(); ++i) moved += !at::equal(after[i], before[i]);
  CHECK(moved == static_cast<int64_t>(after.size()) - 1);
}
