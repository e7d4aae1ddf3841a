#include "model/layers.h"

#include <string>

#include "checkpoint/tensor_layout.h"
#include "model/dropout.h"
#include "model/fake_quantization.h"

namespace nmt::model {
namespace {

namespace names = checkpoint::attention_projection;

MultiheadAttention make_attention(const LayerOptions& o, AttentionKind kind) {
  return MultiheadAttention(MultiheadAttentionOptions(o.d_model(), o.heads())
                                .dropout(o.attention_dropout())
                                .kind(kind));
}

torch::nn::LayerNorm make_norm(const LayerOptions& o) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.d_model()}));
}

/// One residual sublayer: pre-norm x + drop(f(norm(x))), post-norm norm(x + drop(f(x))).
template <typename F>
at::Tensor residual(const LayerOptions& o, bool training, torch::nn::LayerNorm& norm,
                    const at::Tensor& x, F&& f) {
  if (o.norm() == NormPosition::kPre) return x + model::dropout(f(norm(x)), o.dropout(), training);
  return norm(x + model::dropout(f(x), o.dropout(), training));
}

}  // namespace

FeedForwardImpl::FeedForwardImpl(const LayerOptions& options) : options_(options) {
  fc1_ = register_module("fc1", Linear(options.d_model(), options.ffn_dim()));
  fc2_ = register_module("fc2", Linear(options.ffn_dim(), options.d_model()));
  init_projection(fc1_);
  init_projection(fc2_);
}

void FeedForwardImpl::pack_weights(int64_t min_elements) {
  packed_fc1_.pack(fc1_->weight, min_elements);
  packed_fc2_.pack(fc2_->weight, min_elements);
}

at::Tensor FeedForwardImpl::forward(const at::Tensor& x) {
  const bool plain = quantization_ == Quantization::kNone;
  if (plain && options_.activation() == Activation::kRelu) {
    // The packed product applies the ReLU in its own pass over the output.
    const at::Tensor h = packed_fc1_.linear(x, fc1_->weight, fc1_->bias, /*relu=*/true);
    return packed_fc2_.linear(model::dropout(h, options_.activation_dropout(), is_training()),
                              fc2_->weight, fc2_->bias);
  }
  at::Tensor h = plain ? packed_fc1_.linear(x, fc1_->weight, fc1_->bias)
                       : quantized_linear(x, fc1_->weight, fc1_->bias, quantization_);
  // kGelu is the exact (erf) form, transformers' "gelu"; kSilu is x * sigmoid(x), its "swish"
  // and "silu".
  switch (options_.activation()) {
    case Activation::kGelu:
      h = at::gelu(h);
      break;
    case Activation::kSilu:
      h = at::silu(h);
      break;
    default:
      h = at::relu(h);
      break;
  }
  h = model::dropout(h, options_.activation_dropout(), is_training());
  return plain ? packed_fc2_.linear(h, fc2_->weight, fc2_->bias)
               : quantized_linear(h, fc2_->weight, fc2_->bias, quantization_);
}

EncoderLayerImpl::EncoderLayerImpl(const LayerOptions& options) : options_(options) {
  self_attn_ = register_module(std::string(names::kSelfAttention),
                               make_attention(options, AttentionKind::kSelf));
  self_attn_norm_ = register_module("self_attn_norm", make_norm(options));
  ffn_ = register_module("ffn", FeedForward(options));
  ffn_norm_ = register_module("ffn_norm", make_norm(options));
}

at::Tensor EncoderLayerImpl::forward(const at::Tensor& x, const at::Tensor& key_mask) {
  at::Tensor h = residual(options_, is_training(), self_attn_norm_, x,
                          [&](const at::Tensor& y) { return self_attn_(y, key_mask); });
  return residual(options_, is_training(), ffn_norm_, h,
                  [&](const at::Tensor& y) { return ffn_(y); });
}

DecoderLayerImpl::DecoderLayerImpl(const LayerOptions& options) : options_(options) {
  self_attn_ = register_module(std::string(names::kSelfAttention),
                               make_attention(options, AttentionKind::kSelf));
  self_attn_norm_ = register_module("self_attn_norm", make_norm(options));
  cross_attn_ = register_module(std::string(names::kCrossAttention),
                                make_attention(options, AttentionKind::kCross));
  cross_attn_norm_ = register_module("cross_attn_norm", make_norm(options));
  ffn_ = register_module("ffn", FeedForward(options));
  ffn_norm_ = register_module("ffn_norm", make_norm(options));
}

KeyValue DecoderLayerImpl::project_memory(const at::Tensor& memory) {
  return cross_attn_->project_key_value(memory);
}

at::Tensor DecoderLayerImpl::cross_and_ffn(const at::Tensor& x, const KeyValue& memory,
                                           const at::Tensor& src_mask) {
  at::Tensor h = residual(options_, is_training(), cross_attn_norm_, x, [&](const at::Tensor& y) {
    return cross_attn_->attend(y, memory, src_mask);
  });
  return residual(options_, is_training(), ffn_norm_, h,
                  [&](const at::Tensor& y) { return ffn_(y); });
}

at::Tensor DecoderLayerImpl::forward(const at::Tensor& x, const KeyValue& memory,
                                     const at::Tensor& src_mask) {
  // Causal only, no target padding mask: batches are right-padded, so a real token never
  // sees a pad token, and this keeps the flash kernel eligible. Pad positions produce
  // finite outputs that the loss ignores.
  at::Tensor h = residual(options_, is_training(), self_attn_norm_, x, [&](const at::Tensor& y) {
    return self_attn_->forward(y, /*mask=*/at::Tensor(), /*causal=*/true);
  });
  return cross_and_ffn(h, memory, src_mask);
}

at::Tensor DecoderLayerImpl::step(const at::Tensor& x, KeyValueCache& self_cache,
                                  const KeyValue& memory, const at::Tensor& src_mask,
                                  int64_t rows_per_source) {
  at::Tensor h = residual(options_, is_training(), self_attn_norm_, x, [&](const at::Tensor& y) {
    return self_attn_->step(y, self_cache);
  });
  if (rows_per_source == 1) return cross_and_ffn(h, memory, src_mask);
  // [R, 1, d] -> [R / g, g, d]: a source's g rows are g query positions of one sequence
  // (cross-attention, norms and feed-forward treat positions independently).
  const at::Tensor grouped = h.view({-1, rows_per_source, h.size(2)});
  return cross_and_ffn(grouped, memory, src_mask).view(h.sizes());
}

}  // namespace nmt::model
