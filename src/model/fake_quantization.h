#pragma once
// Quantization-aware training for CTranslate2's int8 (train.quantize: int8): the forward
// computes with the values CTranslate2 will compute with, the backward passes the gradient
// through unchanged (the straight-through estimator), and the parameters stay float.
//
// The scheme, per row r of the last dimension (CTranslate2's converter for the weights,
// ctranslate2.specs.model_spec._quantize; its ops::Quantize for the inputs of an int8 product):
//
//   amax_r  = max_j |x_rj|
//   scale_r = 127 / amax_r           (float32; 1 for a row of zeros; amax_r at least
//                                     127 / FLT_MAX, the converter's floor)
//   code_rj = rint(x_rj * scale_r)   (round half to even, as np.rint and std::nearbyint)
//   x'_rj   = code_rj / scale_r
//
// A weight [out, in] has one scale per output row; an input [..., in] one per token. What
// CTranslate2 stores as int8 is every variable named "weight": the Linear layers (attention
// projections, feed-forward) and the token embeddings, with the output projection (a Linear,
// tied or not). Its layer norms, biases and position encodings stay float, and so do ours.

#include <ATen/ATen.h>

#include "model/model_options.h"

namespace nmt::model {

/// A tensor's int8 codes and the per-row scales they were made with (code / scale is the value).
struct Int8Rows {
  at::Tensor codes;   ///< int8, the tensor's shape
  at::Tensor scales;  ///< float32, the shape with the last dimension dropped: 127 / amax
};

/// CTranslate2's int8 quantization of x along its last dimension (computed in float32).
Int8Rows quantize_int8_rows(const at::Tensor& x);

/// code / scale of quantize_int8_rows in x's dtype, with x's gradient passed through
/// unchanged: the forward value is exactly the quantized one (q + (x - x.detach())).
at::Tensor fake_quantize_int8(const at::Tensor& x);

/// x quantized as a model of this kind computes with it: fake_quantize_int8 for kInt8, x itself
/// for kNone.
at::Tensor quantize_as(const at::Tensor& x, Quantization quantization);

/// at::linear(x, weight, bias) as CTranslate2's int8 product computes it for kInt8 (weight and
/// input fake-quantized per row, bias float); plain at::linear for kNone.
at::Tensor quantized_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            Quantization quantization);

}  // namespace nmt::model
