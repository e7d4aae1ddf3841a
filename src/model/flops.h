#pragma once
// Floating-point work of the Transformer, counted from its matrix products, so a measured
// throughput can be set against what the hardware can do (model FLOPs utilization, MFU).
// Element-wise work (norms, softmax, activations) and embedding lookups are left out, as in
// the usual 6·N·D estimate (Kaplan et al. 2020), which this refines with the attention terms.
// A training step costs three forward passes (backward: gradients for both the inputs and
// the weights of every product).
//
// Two counts, for two questions:
// - model FLOPs (AttentionCount::kModel) on real tokens, each sentence pair at its own
//   lengths, with decoder self-attention over its causal half: the work the model needs,
//   which MFU divides by (padding and masked scores are waste, not work);
// - kernel FLOPs (AttentionCount::kKernel) on the padded shapes, every score computed:
//   what dense kernels execute, which PyTorch's FlopCounterMode counts.

#include <cstdint>
#include <vector>

#include "model/model_options.h"

namespace nmt::model {

/// How the products of attention scores and context count.
enum class AttentionCount {
  kModel,    ///< all, the decoder's causal self-attention over its half only (position i
             ///< attends to i + 1 positions)
  kKernel,   ///< all of them, as a dense kernel computes them before masking
  kWeights,  ///< none: the products with weights only (what FlopCounterMode counts where it
             ///< has no formula for the fused attention kernel, as on CPU)
};

/// FLOPs (2 per multiply-add) of one forward pass over a batch of `batch` sentence pairs of
/// `src_len` source and `tgt_len` target tokens: every matrix product of the encoder, the
/// decoder and the output projection onto `tgt_vocab` words.
double forward_flops(const ModelOptions& model, int64_t tgt_vocab, int64_t batch,
                     int64_t src_len, int64_t tgt_len,
                     AttentionCount count = AttentionCount::kModel);
/// FLOPs of one training step over that batch: three forward passes.
double training_flops(const ModelOptions& model, int64_t tgt_vocab, int64_t batch,
                      int64_t src_len, int64_t tgt_len,
                      AttentionCount count = AttentionCount::kModel);
/// Model FLOPs of a training step on real tokens: the sum over the sentence pairs, each at
/// its own source and target length (with EOS), causal half counted once.
double real_training_flops(const ModelOptions& model, int64_t tgt_vocab,
                           const std::vector<int64_t>& src_lengths,
                           const std::vector<int64_t>& tgt_lengths);

}  // namespace nmt::model
