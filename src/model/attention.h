#pragma once
// Multi-head attention over at::scaled_dot_product_attention, which picks the fused
// flash/memory-efficient kernels on GPU. Keys and values are projected separately from the
// attention itself so the decoder can cache them across decoding steps.

#include <cstdint>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace nmt::model {

/// Keys and values split into heads, each [B, heads, S, d_model / heads].
struct KeyValue {
  at::Tensor key;    ///< projected keys
  at::Tensor value;  ///< projected values
};

/// Shape of a multi-head attention block.
struct MultiheadAttentionOptions {
  /// d_model must be a multiple of heads.
  MultiheadAttentionOptions(int64_t d_model, int64_t heads) : d_model_(d_model), heads_(heads) {}
  TORCH_ARG(int64_t, d_model);       ///< input and output width
  TORCH_ARG(int64_t, heads);         ///< attention heads
  TORCH_ARG(double, dropout) = 0.0;  ///< dropout on the attention weights (training only)
};

/// Scaled dot-product attention with separate query, key, value and output projections.
///
/// Masks are boolean, broadcastable to [B, heads, T, S], true where a query may attend to a
/// key (the convention of at::scaled_dot_product_attention). Every row must allow at least
/// one key, or the softmax yields NaN; the Transformer guarantees this for padding.
class MultiheadAttentionImpl : public torch::nn::Module {
 public:
  /// Builds the four projections, Xavier-uniform weights and zero biases.
  explicit MultiheadAttentionImpl(const MultiheadAttentionOptions& options);

  /// Attends from query [B, T, d] to memory [B, S, d] (self-attention: the same tensor).
  /// causal: query t sees keys 0..t only (needs T == S); mask: optional boolean mask.
  at::Tensor forward(const at::Tensor& query, const at::Tensor& memory, const at::Tensor& mask = {},
                     bool causal = false);

  /// Projects memory [B, S, d] into per-head keys and values.
  KeyValue project_key_value(const at::Tensor& memory);

  /// Attends from query [B, T, d] to already projected keys and values; returns [B, T, d].
  at::Tensor attend(const at::Tensor& query, const KeyValue& kv, const at::Tensor& mask = {},
                    bool causal = false);

  /// The options this block was built with.
  const MultiheadAttentionOptions& options() const { return options_; }

 private:
  /// [B, T, d] -> [B, heads, T, d / heads].
  at::Tensor split_heads(const at::Tensor& x) const;

  MultiheadAttentionOptions options_;
  torch::nn::Linear q_proj_{nullptr};
  torch::nn::Linear k_proj_{nullptr};
  torch::nn::Linear v_proj_{nullptr};
  torch::nn::Linear out_proj_{nullptr};
};
TORCH_MODULE(MultiheadAttention);

/// Key padding mask [B, S] (true at padding) -> boolean attention mask [B, 1, 1, S], true
/// where attending is allowed. A row that is all padding attends to all of it instead:
/// softmax over no keys is NaN in some kernels, and 0 * NaN would reach the gradients.
at::Tensor attention_mask_from_padding(const at::Tensor& pad_mask);

/// Xavier-uniform weight and zero bias, the initialization of every projection in the model.
void init_projection(torch::nn::Linear& linear);

}  // namespace nmt::model
