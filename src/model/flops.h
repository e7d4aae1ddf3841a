#pragma once
// Floating-point work of the Transformer, counted from its matrix products, so a measured
// throughput can be set against what the hardware can do (model FLOPs utilization, MFU).

#include <cstdint>

#include "model/model_options.h"

namespace nmt::model {

/// FLOPs (2 per multiply-add) of one forward pass over a batch of `batch` sentence pairs padded
/// to `src_len` source and `tgt_len` target tokens: every matrix product of the encoder, the
/// decoder and the output projection onto `tgt_vocab` words. Attention scores count in full
/// (the causal half included), since the padded shapes are what the kernels compute;
/// element-wise work (norms, softmax, activations) and embedding lookups are left out, as in
/// the usual 6·N·D estimate (Kaplan et al. 2020), which this refines with the attention terms.
double forward_flops(const ModelOptions& model, int64_t tgt_vocab, int64_t batch,
                     int64_t src_len, int64_t tgt_len);

/// FLOPs of one training step over that batch: forward plus backward, where backward costs
/// twice the forward (gradients for both the inputs and the weights of every product).
double training_flops(const ModelOptions& model, int64_t tgt_vocab, int64_t batch,
                      int64_t src_len, int64_t tgt_len);

}  // namespace nmt::model
