#include "catch_torch.h"  // first: see the header

#include <cmath>
#include <vector>

#include <ATen/ATen.h>

#include "model/fake_quantization.h"
#include "model/transformer.h"

using nmt::model::fake_quantize_int8;
using nmt::model::Int8Rows;
using nmt::model::ModelOptions;
using nmt::model::Quantization;
using nmt::model::quantize_int8_rows;
using nmt::model::Transformer;

namespace {

at::Tensor row(const std::vector<float>& values) {
  return at::tensor(values, at::kFloat).unsqueeze(0);
}

std::vector<int> codes_of(const Int8Rows& q) {
  const at::Tensor c = q.codes.to(at::kInt).contiguous().view(-1);
  return {c.data_ptr<int>(), c.data_ptr<int>() + c.numel()};
}

}  // namespace

TEST_CASE("int8 quantization: scale 127 over each row's max magnitude, halves to even") {
  // Row 0: max 127, scale 1: 0.5, 1.5, 2.5 and -2.5 round to the even neighbour (np.rint).
  // Row 1: max 2, scale 63.5: 2 -> 127, -1 -> -63.5 -> -64, 0.3 -> 19.05 -> 19.
  const at::Tensor x =
      at::cat({row({127, 0.5f, 1.5f, 2.5f, -2.5f, -127}), row({2, -1, 0.3f, 0, 0, 0})});
  const Int8Rows q = quantize_int8_rows(x);
  CHECK(q.codes.scalar_type() == at::kChar);
  CHECK(codes_of(q) == std::vector<int>{127, 0, 2, 2, -2, -127, 127, -64, 19, 0, 0, 0});
  REQUIRE(q.scales.sizes() == at::IntArrayRef{2});
  CHECK(q.scales[0].item<float>() == 1.0f);
  CHECK(q.scales[1].item<float>() == 127.0f / 2.0f);
  // The value is code / scale, exactly.
  const at::Tensor value = fake_quantize_int8(x);
  CHECK(value[1][1].item<float>() == -64.0f / 63.5f);
  CHECK(value[0][2].item<float>() == 2.0f);
}

TEST_CASE("int8 quantization: the scale is per row of the last dimension, float32 127 / max") {
  const at::Tensor x = at::randn({3, 4, 16}, at::TensorOptions().dtype(at::kFloat));
  const Int8Rows q = quantize_int8_rows(x);
  REQUIRE(q.scales.sizes() == at::IntArrayRef({3, 4}));
  const at::Tensor expected = at::full({3, 4}, 127.0f).div(x.abs().amax(-1));
  CHECK(at::equal(q.scales, expected));
  CHECK(q.codes.abs().amax(-1).eq(127).all().item<bool>());
  // Every value is within half a step of its row's grid.
  const at::Tensor error = (fake_quantize_int8(x) - x).abs() * q.scales.unsqueeze(-1);
  CHECK(error.max().item<float>() <= 0.5f + 1e-5f);
}

TEST_CASE("int8 quantization: a row of zeros has scale 1 and stays zero") {
  const at::Tensor x = at::cat({row({0, 0, 0}), row({0.25f, -1, 0.5f})});
  const Int8Rows q = quantize_int8_rows(x);
  CHECK(q.scales[0].item<float>() == 1.0f);
  CHECK(codes_of(q) == std::vector<int>{0, 0, 0, 32, -127, 64});
  const at::Tensor value = fake_quantize_int8(x);
  CHECK(value[0].eq(0).all().item<bool>());
  CHECK(value.isfinite().all().item<bool>());
  // A row of tiny values divides by the converter's floor, 127 / FLT_MAX: a finite scale.
  const Int8Rows tiny = quantize_int8_rows(row({1e-38f, -1e-38f}));
  CHECK(std::isfinite(tiny.scales[0].item<float>()));
  CHECK(fake_quantize_int8(row({1e-38f, -1e-38f})).isfinite().all().item<bool>());
}

TEST_CASE("int8 fake quantization passes the gradient straight through") {
  const at::Tensor x = at::randn({5, 7}).requires_grad_(true);
  const at::Tensor upstream = at::randn({5, 7});
  const at::Tensor y = fake_quantize_int8(x);
  CHECK(at::equal(y.detach(), fake_quantize_int8(x.detach())));
  (y * upstream).sum().backward();
  CHECK(at::equal(x.grad(), upstream));
}

TEST_CASE("int8 quantization in a Transformer: logits near float, gradients to every weight") {
  ModelOptions options;
  options.encoder_layers = 2;
  options.decoder_layers = 1;
  options.d_model = 32;
  options.heads = 4;
  options.ffn_dim = 64;
  options.dropout = 0.0;
  at::manual_seed(3);
  Transformer model(options, 50, 50, /*pad_id=*/0);
  const at::Tensor src = at::randint(1, 50, {2, 6});
  const at::Tensor tgt = at::randint(1, 50, {2, 5});
  const at::Tensor fp32 = model->forward(src, tgt).detach();
  model->set_quantization(Quantization::kInt8);
  CHECK(model->quantization() == Quantization::kInt8);
  const at::Tensor int8 = model->forward(src, tgt);
  // Different, as 8 bits must be, but close: about 1% of the logits' scale.
  CHECK_FALSE(at::equal(int8.detach(), fp32));
  const double gap = (int8.detach() - fp32).abs().max().item<double>();
  CHECK(gap < 0.1 * fp32.abs().max().item<double>());
  int8.sum().backward();
  for (const auto& p : model->named_parameters()) {
    INFO(p.key());
    REQUIRE(p.value().grad().defined());
    CHECK(p.value().grad().abs().sum().item<double>() > 0);
  }
  // Back to float: the float logits again.
  model->set_quantization(Quantization::kNone);
  CHECK(at::equal(model->forward(src, tgt).detach(), fp32));
}
