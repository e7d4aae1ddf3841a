#include "model/fake_quantization.h"

#include <limits>

namespace nmt::model {
namespace {

/// The smallest row maximum CTranslate2's converter divides by: float32 127 / FLT_MAX.
const float kSmallestMax = 127.0f / std::numeric_limits<float>::max();

}  // namespace

Int8Rows quantize_int8_rows(const at::Tensor& x) {
  const at::Tensor values = x.detach().to(at::kFloat);
  // As the converter: a row of zeros divides by 127 (scale 1), and a floor keeps 127 / amax
  // finite for a row of tiny nonzero values.
  const at::Tensor row_max = values.abs().amax(-1, /*keepdim=*/true);
  const at::Tensor amax =
      at::where(row_max.eq(0), at::full_like(row_max, 127.0), row_max).clamp_min(kSmallestMax);
  // float32 127 / amax, as numpy computes it from the float32 array (and CTranslate2's kernel).
  const at::Tensor scales = at::full_like(amax, 127.0).div(amax);
  // at::round rounds half to even, as np.rint. |x * scale| <= 127 up to float rounding, which
  // rounds back to 127; the clamp only keeps the int8 cast safe.
  const at::Tensor codes = at::round(values * scales).clamp_(-127, 127).to(at::kChar);
  return {codes, scales.squeeze(-1)};
}

at::Tensor fake_quantize_int8(const at::Tensor& x) {
  const Int8Rows q = quantize_int8_rows(x);
  const at::Tensor value = (q.codes.to(at::kFloat) / q.scales.unsqueeze(-1)).to(x.scalar_type());
  // Exactly the quantized value forward (x - x.detach() is zero), the identity backward.
  return value + (x - x.detach());
}

at::Tensor quantize_as(const at::Tensor& x, Quantization quantization) {
  return quantization == Quantization::kInt8 ? fake_quantize_int8(x) : x;
}

at::Tensor quantized_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            Quantization quantization) {
  return at::linear(quantize_as(x, quantization), quantize_as(weight, quantization), bias);
}

}  // namespace nmt::model
