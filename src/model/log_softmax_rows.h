#pragma once
// The log-softmax of a decoding step's logits, in place, on the CPU in float32: beam search
// ranks every row's extensions by it. ATen's log_softmax calls a vectorized exp a few lanes at a
// time and was 7% of a beam-4 decoding run (demo model, AMD EPYC); here each row is two passes
// of vector code (its maximum; the sum of exp with model/vector_lanes.h's inlined exp) and one
// that writes x - max - log(sum).
//
// exp here is within 2 units in the last place (Cephes' expf) and sums are in another order than
// ATen's: results agree with at::log_softmax to float rounding, not bit for bit.

#include <ATen/core/Tensor.h>

#include "model/vector_lanes.h"

namespace nmt::model {

/// Replaces each row of logits [rows, V] by its log-softmax: float32, contiguous, on the CPU
/// (anything else: at::log_softmax's result copied back, as before). A row with NaN, or with
/// nothing but -inf, becomes NaN, as at::log_softmax makes it. Rows are split among LibTorch's
/// intra-op threads. lanes: the vector width (model/vector_lanes.h).
void log_softmax_rows_(at::Tensor& logits, VectorLanes lanes = VectorLanes::automatic);

}  // namespace nmt::model
