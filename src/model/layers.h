#pragma once
// The encoder and decoder blocks of the Transformer, pre- or post-norm.

#include <cstdint>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include "model/attention.h"
#include "model/linear.h"
#include "model/model_options.h"
#include "model/packed_linear.h"

namespace nmt::model {

/// Shape of one encoder or decoder block; the per-layer subset of ModelOptions.
struct LayerOptions {
  /// Takes the block shape from the model options.
  explicit LayerOptions(const ModelOptions& model)
      : d_model_(model.d_model),
        heads_(model.heads),
        ffn_dim_(model.ffn_dim),
        dropout_(model.dropout),
        attention_dropout_(model.attention_dropout),
        activation_dropout_(model.activation_dropout),
        activation_(model.activation),
        norm_(model.norm) {}
  TORCH_ARG(int64_t, d_model);            ///< block width
  TORCH_ARG(int64_t, heads);              ///< attention heads
  TORCH_ARG(int64_t, ffn_dim);            ///< feed-forward inner width
  TORCH_ARG(double, dropout);             ///< dropout on each residual branch
  TORCH_ARG(double, attention_dropout);   ///< dropout on attention weights
  TORCH_ARG(double, activation_dropout);  ///< dropout after the feed-forward activation
  TORCH_ARG(Activation, activation);      ///< feed-forward activation
  TORCH_ARG(NormPosition, norm);          ///< LayerNorm before or after each residual add
};

/// Position-wise feed-forward network: fc2(dropout(act(fc1(x)))).
class FeedForwardImpl : public torch::nn::Module {
 public:
  /// Builds fc1 [d -> ffn_dim] and fc2 [ffn_dim -> d].
  explicit FeedForwardImpl(const LayerOptions& options);
  /// Applies the network to x [..., d].
  at::Tensor forward(const at::Tensor& x);
  /// What fc1 and fc2 compute with (model/fake_quantization.h); kNone when built.
  void set_quantization(Quantization quantization) { quantization_ = quantization; }
  /// Packs fc1's and fc2's weights, where of at least min_elements elements, for CPU float32
  /// inference (model/packed_linear.h); a packed copy is used only while its weight is unchanged.
  void pack_weights(int64_t min_elements = min_packed_elements());

 private:
  LayerOptions options_;
  Quantization quantization_ = Quantization::kNone;
  Linear fc1_{nullptr};
  Linear fc2_{nullptr};
  PackedWeight packed_fc1_, packed_fc2_;  ///< see pack_weights
};
TORCH_MODULE(FeedForward);

/// Encoder block: self-attention over the source, then feed-forward.
class EncoderLayerImpl : public torch::nn::Module {
 public:
  /// Builds the block.
  explicit EncoderLayerImpl(const LayerOptions& options);
  /// x [B, S, d]; key_mask boolean [B, 1, 1, S], true for keys that may be attended.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& key_mask);

 private:
  LayerOptions options_;
  MultiheadAttention self_attn_{nullptr};
  torch::nn::LayerNorm self_attn_norm_{nullptr};
  FeedForward ffn_{nullptr};
  torch::nn::LayerNorm ffn_norm_{nullptr};
};
TORCH_MODULE(EncoderLayer);

/// Decoder block: causal self-attention, attention to the encoder output, feed-forward.
class DecoderLayerImpl : public torch::nn::Module {
 public:
  /// Builds the block.
  explicit DecoderLayerImpl(const LayerOptions& options);

  /// Projects the encoder output [B, S, d] into this block's cross-attention keys/values.
  KeyValue project_memory(const at::Tensor& memory);

  /// All target positions at once (teacher forcing): x [B, T, d]; memory from
  /// project_memory; src_mask boolean [B, 1, 1, S].
  at::Tensor forward(const at::Tensor& x, const KeyValue& memory, const at::Tensor& src_mask);

  /// One new position x [R, 1, d]: appends its keys/values to self_cache (empty before the
  /// first step) and attends to the cache instead of recomputing the prefix. memory and
  /// src_mask are per source, each serving rows_per_source consecutive rows.
  at::Tensor step(const at::Tensor& x, KeyValueCache& self_cache, const KeyValue& memory,
                  const at::Tensor& src_mask, int64_t rows_per_source = 1);

 private:
  /// Cross-attention and feed-forward sublayers, shared by forward and step.
  at::Tensor cross_and_ffn(const at::Tensor& x, const KeyValue& memory, const at::Tensor& src_mask);

  LayerOptions options_;
  MultiheadAttention self_attn_{nullptr};
  torch::nn::LayerNorm self_attn_norm_{nullptr};
  MultiheadAttention cross_attn_{nullptr};
  torch::nn::LayerNorm cross_attn_norm_{nullptr};
  FeedForward ffn_{nullptr};
  torch::nn::LayerNorm ffn_norm_{nullptr};
};
TORCH_MODULE(DecoderLayer);

}  // namespace nmt::model
