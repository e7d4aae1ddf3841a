#pragma once
// Multi-head attention over at::scaled_dot_product_attention, which picks the fused
// flash/memory-efficient kernels on GPU. Keys and values are projected separately from the
// attention itself so the decoder can cache them across decoding steps.
//
// The input projections are fused, as in fairseq, Megatron and CTranslate2: self-attention
// projects queries, keys and values in one [3d, d] matrix product, cross-attention the encoder
// output's keys and values in one [2d, d] (and the decoder's queries in a [d, d]); one large
// product keeps the cores busier than three small ones. The names are
// checkpoint::attention_projection's.

#include <cstdint>
#include <utility>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "model/key_value_cache.h"
#include "model/linear.h"
#include "model/model_options.h"
#include "model/packed_linear.h"

namespace nmt::model {

/// Which attention a block is: what it projects, and so which fused projections it has.
enum class AttentionKind {
  kSelf,   ///< queries, keys and values from one sequence: qkv_proj [3d, d]
  kCross,  ///< queries from one, keys and values from another: q_proj [d, d], kv_proj [2d, d]
};

/// Shape of a multi-head attention block.
struct MultiheadAttentionOptions {
  /// d_model must be a multiple of heads.
  MultiheadAttentionOptions(int64_t d_model, int64_t heads) : d_model_(d_model), heads_(heads) {}
  TORCH_ARG(int64_t, d_model);       ///< input and output width
  TORCH_ARG(int64_t, heads);         ///< attention heads
  TORCH_ARG(double, dropout) = 0.0;  ///< dropout on the attention weights (training only)
  TORCH_ARG(AttentionKind, kind) = AttentionKind::kSelf;  ///< self- or cross-attention
};

/// Scaled dot-product attention with fused input projections and an output projection.
///
/// Masks are boolean, broadcastable to [B, heads, T, S], true where a query may attend to a
/// key (the convention of at::scaled_dot_product_attention). Every row must allow at least
/// one key, or the softmax yields NaN; the Transformer guarantees this for padding.
class MultiheadAttentionImpl : public torch::nn::Module {
 public:
  /// Builds the projections: Xavier-uniform weights, each [d, d] block of a fused projection
  /// drawn as a separate [d, d] layer would be (same bounds, same draws in the same order), zero biases.
  explicit MultiheadAttentionImpl(const MultiheadAttentionOptions& options);

  /// Self-attention: attends from x [B, T, d] to itself. causal: position t sees keys 0..t
  /// only; mask: optional boolean mask (not with causal).
  at::Tensor forward(const at::Tensor& x, const at::Tensor& mask = {}, bool causal = false);

  /// Self-attention of one new position x [B, 1, d] in incremental decoding: appends its keys
  /// and values to cache (empty before the first step) and attends to all of it.
  at::Tensor step(const at::Tensor& x, KeyValueCache& cache);

  /// Cross-attention: projects memory [B, S, d] into per-head keys and values.
  KeyValue project_key_value(const at::Tensor& memory);

  /// Cross-attention: attends from query [B, T, d] to projected keys and values; returns
  /// [B, T, d].
  at::Tensor attend(const at::Tensor& query, const KeyValue& kv, const at::Tensor& mask = {});

  /// The options this block was built with.
  const MultiheadAttentionOptions& options() const { return options_; }

  /// What its projections compute with (model/fake_quantization.h); kNone when built.
  void set_quantization(Quantization quantization) { quantization_ = quantization; }

  /// Packs its projections' weights of at least min_elements elements for CPU float32 inference
  /// (model/packed_linear.h); a packed copy is used only while its weight is unchanged.
  void pack_weights(int64_t min_elements = min_packed_elements());

 private:
  /// One of its projections applied to x, quantized as set_quantization says, with packed
  /// (its packed weight, if any) when it applies.
  at::Tensor project(const Linear& linear, const PackedWeight& packed, const at::Tensor& x) const;
  /// [B, T, d] -> [B, heads, T, d / heads].
  at::Tensor split_heads(const at::Tensor& x) const;
  /// Self-attention: per-head queries and keys/values of x [B, T, d] from one product.
  std::pair<at::Tensor, KeyValue> project_self(const at::Tensor& x);
  /// Attention of per-head queries q to kv, then the output projection -> [B, T, d].
  at::Tensor attend_heads(const at::Tensor& q, const KeyValue& kv, const at::Tensor& mask,
                          bool causal);

  MultiheadAttentionOptions options_;
  Linear qkv_proj_{nullptr};  ///< self-attention only
  Linear q_proj_{nullptr};    ///< cross-attention only
  Linear kv_proj_{nullptr};   ///< cross-attention only
  Linear out_proj_{nullptr};
  PackedWeight packed_qkv_, packed_q_, packed_kv_, packed_out_;  ///< see pack_weights
  Quantization quantization_ = Quantization::kNone;
};
TORCH_MODULE(MultiheadAttention);

/// Key padding mask [B, S] (true at padding) -> boolean attention mask [B, 1, 1, S], true
/// where attending is allowed. A row that is all padding attends to all of it instead:
/// softmax over no keys is NaN in some kernels, and 0 * NaN would reach the gradients.
at::Tensor attention_mask_from_padding(const at::Tensor& pad_mask);

/// Xavier-uniform weight and zero bias, the initialization of every projection in the model.
/// blocks > 1: the weight is that many [out / blocks, in] projections stacked by rows, each
/// initialized as a separate layer, one after the other. Nothing inside a SkipInitialization.
void init_projection(Linear& linear, int64_t blocks = 1);

}  // namespace nmt::model
