// Weights prepacked for CPU float32 inference: the packed product computes at::linear (to float
// rounding) for the shapes decoding uses, and a packed copy is never used where it would be
// wrong: after its weight changed in place, with autograd on, or under autocast. A packed
// Transformer decodes as the unpacked one.
#include "catch_torch.h"  // first: see the header
#include "skip.h"

#include <vector>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include "model/packed_linear.h"
#include "model/transformer.h"

using nmt::model::PackedWeight;

namespace {

bool close(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && at::allclose(a, b, /*rtol=*/1e-5, /*atol=*/1e-5);
}

}  // namespace

TEST_CASE("packed linear: equals at::linear for a step's shapes, with bias, without, fused ReLU",
          "[model][packed_linear]") {
  if (!nmt::model::weight_packing_available()) NMT_SKIP("this LibTorch has no oneDNN linear ops");
  at::manual_seed(5);
  at::NoGradGuard no_grad;
  const at::Tensor weight = at::randn({48, 32});
  const at::Tensor bias = at::randn({48});
  PackedWeight packed;
  CHECK(packed.empty());
  packed.pack(weight);
  CHECK(packed.empty());  // smaller than kMinPackedElements: not worth packing
  packed.pack(weight, /*min_elements=*/0);
  REQUIRE_FALSE(packed.empty());
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{1, 32}, {7, 32}, {64, 32}, {3, 5, 32}, {4, 1, 32}}) {
    INFO("input " << at::IntArrayRef(shape));
    const at::Tensor x = at::randn(shape);
    CHECK(close(packed.linear(x, weight, bias), at::linear(x, weight, bias)));
    CHECK(close(packed.linear(x, weight, {}), at::linear(x, weight)));
    CHECK(close(packed.linear(x, weight, bias, /*relu=*/true),
                at::relu(at::linear(x, weight, bias))));
  }
  // A strided input (the transposed heads of attention) is read as its values.
  const at::Tensor strided = at::randn({32, 6}).t();
  CHECK(close(packed.linear(strided, weight, bias), at::linear(strided, weight, bias)));
  packed.clear();
  CHECK(packed.empty());
}

TEST_CASE("packed linear: by default a weight is packed from the processor's threshold up",
          "[model][packed_linear]") {
  if (!nmt::model::weight_packing_available()) NMT_SKIP("this LibTorch has no oneDNN linear ops");
  using nmt::model::kMinPackedElements;
  using nmt::model::kMinPackedElementsOffIntel;
  const int64_t threshold = nmt::model::min_packed_elements();
  CHECK((threshold == kMinPackedElements || threshold == kMinPackedElementsOffIntel));
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
  // By vendor: on an AMD EPYC, MKL's sgemm lost to oneDNN's from 192 x 576 up.
  CHECK(threshold == (__builtin_cpu_is("intel") ? kMinPackedElements : kMinPackedElementsOffIntel));
#endif
  at::NoGradGuard no_grad;
  // 256 x 256 (2^16): packed off Intel, not on it; 2^18 elements: packed everywhere.
  PackedWeight packed;
  packed.pack(at::randn({256, 256}));
  CHECK(packed.empty() == (256 * 256 < threshold));
  packed.pack(at::randn({256, 255}));
  CHECK(packed.empty());
  packed.pack(at::randn({512, 512}));
  CHECK_FALSE(packed.empty());
}

TEST_CASE("packed linear: an in-place change of the weight, autograd or autocast use the weight",
          "[model][packed_linear]") {
  if (!nmt::model::weight_packing_available()) NMT_SKIP("this LibTorch has no oneDNN linear ops");
  at::manual_seed(6);
  at::Tensor weight = at::randn({16, 8}).requires_grad_(true);
  const at::Tensor bias = at::randn({16});
  const at::Tensor x = at::randn({4, 8});
  PackedWeight packed;
  packed.pack(weight, /*min_elements=*/0);
  {
    // As an optimizer step does: the packed copy is now stale.
    at::NoGradGuard no_grad;
    weight.mul_(-2.0);
    CHECK(close(packed.linear(x, weight, bias), at::linear(x, weight, bias)));
    // Another tensor than the one packed: its own values.
    const at::Tensor other = at::randn({16, 8});
    CHECK(close(packed.linear(x, other, bias), at::linear(x, other, bias)));
  }
  packed.pack(weight, /*min_elements=*/0);
  {
    // Autograd on: the product is recorded, and its gradient reaches the weight.
    const at::Tensor y = packed.linear(x, weight, bias, /*relu=*/true);
    REQUIRE(y.requires_grad());
    y.sum().backward();
    REQUIRE(weight.grad().defined());
    CHECK(
        close(weight.grad(),
              (at::relu(at::linear(x, weight.detach(), bias)).gt(0).to(at::kFloat)).t().matmul(x)));
  }
  {
    at::NoGradGuard no_grad;
    at::autocast::set_autocast_enabled(at::kCPU, true);
    const at::Tensor y = packed.linear(x, weight, bias);
    at::autocast::set_autocast_enabled(at::kCPU, false);
    // Under autocast the product runs in bfloat16, as at::linear does there.
    CHECK(y.scalar_type() == at::kBFloat16);
  }
}

TEST_CASE("packed linear: a packed Transformer decodes as the unpacked one, until a weight changes",
          "[model][packed_linear]") {
  if (!nmt::model::weight_packing_available()) NMT_SKIP("this LibTorch has no oneDNN linear ops");
  nmt::model::ModelOptions o;
  o.encoder_layers = 2;
  o.decoder_layers = 2;
  o.d_model = 32;
  o.heads = 4;
  o.ffn_dim = 64;
  o.max_positions = 32;
  const auto build = [&] {
    at::manual_seed(7);
    nmt::model::Transformer model(o, 13, 13, /*pad_id=*/1);
    model->eval();
    return model;
  };
  nmt::model::Transformer plain = build();
  nmt::model::Transformer packed = build();
  packed->pack_weights(/*min_elements=*/0);
  at::NoGradGuard no_grad;
  const at::Tensor src = at::tensor({5, 6, 7, 8, 1, 9, 10, 4, 3, 2}, at::kLong).view({2, 5});
  const at::Tensor tokens = at::tensor({2, 2}, at::kLong);

  const auto step_logits = [&](nmt::model::Transformer& model) {
    const nmt::model::EncoderOutput encoded = model->encode(src);
    nmt::model::DecoderState state = model->init_state(encoded);
    at::Tensor logits;
    for (int i = 0; i < 4; ++i) logits = model->decode_step(tokens, state);
    return logits;
  };
  CHECK(close(step_logits(packed), step_logits(plain)));
  CHECK(close(packed->forward(src, src), plain->forward(src, src)));

  // A training step would change every parameter in place; the packed copies then go unused.
  for (auto* model : {&plain, &packed})
    for (at::Tensor p : (*model)->parameters()) p.mul_(0.5).add_(0.01);
  CHECK(close(step_logits(packed), step_logits(plain)));
}
