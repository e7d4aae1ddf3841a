#pragma once
// Attention of a few queries per row in float32 on the CPU: the shape of a decoding step, one
// query per row in self-attention and one per beam in a sentence's cross-attention (beam
// search groups a sentence's rows). There, a row and head holds one to a few queries of 32 to
// 128 numbers against tens of keys, and LibTorch's batched products (softmax between two
// bmm) spend most of their time per call: a matrix-vector product per row and head, each of a
// few hundred multiplications, plus a masked_fill and a softmax over the whole score tensor.
// This kernel does a row and head in one pass (scores, softmax and the weighted sum of values)
// and writes the heads side by side, the layout the output projection reads, so no transpose
// copy follows.
//
// Sums are in another order than the matrix products': results agree with softmax(q k^T) v to
// float rounding, not bit for bit.

#include <ATen/core/Tensor.h>

#include "model/vector_lanes.h"

namespace nmt::model {

/// softmax(scale * q k^T, masked) v for queries q [B, heads, Q, d_head] and keys and values
/// [B, heads, S, d_head], all float32 on the CPU with any strides; mask boolean, broadcastable to
/// [B, heads, Q, S], true where a query may attend (undefined: everywhere). Returns the context
/// [B, Q, heads * d_head], contiguous. A query with no key to attend to gets NaN, as softmax
/// over nothing but -inf does.
/// lanes: the kernel's vector width (model/vector_lanes.h).
at::Tensor attend_few_queries(const at::Tensor& q, const at::Tensor& key, const at::Tensor& value,
                              const at::Tensor& mask, double scale,
                              VectorLanes lanes = VectorLanes::automatic);

}  // namespace nmt::model
