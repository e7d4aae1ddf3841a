#include "model/transformer.h"

#include <cmath>

#include <ATen/core/grad_mode.h>
#include <torch/nn/init.h>

#include "model/fake_quantization.h"
#include "model/initialization.h"
#include "model/recompute.h"
#include "model/row_selection.h"
#include "util/error.h"

namespace nmt::model {
namespace {

InputEmbeddingOptions embedding_options(const ModelOptions& o, int64_t vocab_size, int64_t pad_id) {
  return InputEmbeddingOptions(vocab_size, o.d_model, pad_id)
      .positions(o.positions)
      .max_positions(o.max_positions)
      .scale(o.scale_embeddings)
      .dropout(o.dropout);
}

torch::nn::LayerNorm make_final_norm(int64_t d_model) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({d_model}));
}

/// layer(x, mask), recomputed in backward when `recompute`.
at::Tensor run_layer(EncoderLayer& layer, const at::Tensor& x, const at::Tensor& mask,
                     bool recompute) {
  if (!recompute) return layer(x, mask);
  return recompute_in_backward(
      [layer, mask](const std::vector<at::Tensor>& in) mutable { return layer(in[0], mask); }, {x},
      layer->parameters());
}

/// layer(x, its projection of memory, src_mask), recomputed in backward when `recompute`.
/// Recomputed, the layer keeps its input and the encoder output that every layer shares
/// rather than its own keys and values (2 [B, S, d] per layer), for two more [S, d] x [d, d]
/// products.
at::Tensor run_layer(DecoderLayer& layer, const at::Tensor& x, const at::Tensor& memory,
                     const at::Tensor& src_mask, bool recompute) {
  if (!recompute) return layer(x, layer->project_memory(memory), src_mask);
  return recompute_in_backward(
      [layer, src_mask](const std::vector<at::Tensor>& in) mutable {
        return layer(in[0], layer->project_memory(in[1]), src_mask);
      },
      {x, memory}, layer->parameters());
}

}  // namespace

TransformerImpl::TransformerImpl(const ModelOptions& options, int64_t src_vocab_size,
                                 int64_t tgt_vocab_size, int64_t pad_id)
    : options_(options), pad_id_(pad_id) {
  NMT_CHECK(options.tie_embeddings != TiedEmbeddings::kAll || src_vocab_size == tgt_vocab_size,
            nmt::ConfigError,
            "model.tie_embeddings = all needs one joint vocabulary: expected equal source and "
            "target vocabulary sizes, found {} and {}",
            src_vocab_size, tgt_vocab_size);
  NMT_CHECK(options.encoder_layers >= 1 && options.decoder_layers >= 1, nmt::ConfigError,
            "model: expected at least one encoder and one decoder layer, found {} and {}",
            options.encoder_layers, options.decoder_layers);

  encoder_embed_ = register_module(
      "encoder_embed", InputEmbedding(embedding_options(options, src_vocab_size, pad_id)));
  const auto decoder_embedding = embedding_options(options, tgt_vocab_size, pad_id);
  if (options.tie_embeddings == TiedEmbeddings::kAll) {
    decoder_embed_ = register_module("decoder_embed",
                                     InputEmbedding(decoder_embedding, encoder_embed_->table()));
  } else {
    decoder_embed_ = register_module("decoder_embed", InputEmbedding(decoder_embedding));
  }

  const LayerOptions layer(options);
  encoder_layers_list_ = register_module("encoder_layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < options.encoder_layers; ++i) {
    encoder_layers_.emplace_back(layer);
    encoder_layers_list_->push_back(encoder_layers_.back());
  }
  decoder_layers_list_ = register_module("decoder_layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < options.decoder_layers; ++i) {
    decoder_layers_.emplace_back(layer);
    decoder_layers_list_->push_back(decoder_layers_.back());
  }
  if (options.norm == NormPosition::kPre) {
    // Pre-norm leaves the residual stream unnormalized; normalize before it leaves a stack.
    encoder_norm_ = register_module("encoder_norm", make_final_norm(options.d_model));
    decoder_norm_ = register_module("decoder_norm", make_final_norm(options.d_model));
  }
  if (options.tie_embeddings == TiedEmbeddings::kNone) {
    output_projection_ = register_module("output_projection",
                                         Linear(options.d_model, tgt_vocab_size, /*bias=*/false));
    // Same scale as the embedding tables, so tied and untied models start alike (fairseq).
    if (initializing())
      torch::nn::init::normal_(output_projection_->weight, 0.0,
                               std::pow(static_cast<double>(options.d_model), -0.5));
  }
  if (options.output_bias) {
    // A parameter, as Marian trains it, saved and loaded with the others; frozen, it takes no
    // gradient (transformers keeps final_logits_bias as a fixed buffer).
    output_bias_ = register_parameter("output_bias", at::zeros({tgt_vocab_size}),
                                      /*requires_grad=*/!options.freeze_output_bias);
  }
}

void TransformerImpl::set_quantization(Quantization quantization) {
  quantization_ = quantization;
  // The layers that hold what CTranslate2 quantizes; layer norms and positions stay float.
  for (const auto& module : modules(/*include_self=*/false)) {
    if (auto* attention = module->as<MultiheadAttentionImpl>()) {
      attention->set_quantization(quantization);
    } else if (auto* ffn = module->as<FeedForwardImpl>()) {
      ffn->set_quantization(quantization);
    } else if (auto* embedding = module->as<InputEmbeddingImpl>()) {
      embedding->set_quantization(quantization);
    }
  }
}

void TransformerImpl::pack_weights(int64_t min_elements) {
  for (const auto& module : modules(/*include_self=*/false)) {
    if (auto* attention = module->as<MultiheadAttentionImpl>()) {
      attention->pack_weights(min_elements);
    } else if (auto* ffn = module->as<FeedForwardImpl>()) {
      ffn->pack_weights(min_elements);
    }
  }
  packed_output_.pack(output_weight(), min_elements);
}

at::Tensor TransformerImpl::output_weight() const {
  return output_projection_ ? output_projection_->weight : target_embedding();
}

EncoderOutput TransformerImpl::encode(const at::Tensor& src_ids) {
  TORCH_CHECK(src_ids.dim() == 2, "encode: expected src_ids [B, S], found ", src_ids.sizes());
  const at::Tensor pad_mask = src_ids.eq(pad_id_);
  const at::Tensor mask = attention_mask_from_padding(pad_mask);
  at::Tensor x = encoder_embed_(src_ids);
  const bool recompute = recomputes_layers();
  for (EncoderLayer& layer : encoder_layers_) x = run_layer(layer, x, mask, recompute);
  if (encoder_norm_) x = encoder_norm_(x);
  return {x, pad_mask};
}

bool TransformerImpl::recomputes_layers() const {
  // Only where backward follows: in eval or without grad there is no graph to spare.
  return activation_checkpointing_ && is_training() && at::GradMode::is_enabled();
}

at::Tensor TransformerImpl::project(const at::Tensor& x) {
  // CTranslate2's projection is an int8 product like the others (bias float, added below).
  const at::Tensor y = decoder_norm_ ? decoder_norm_(x) : x;
  at::Tensor logits = quantization_ == Quantization::kNone
                          ? packed_output_.linear(y, output_weight(), /*bias=*/{})
                          : quantized_linear(y, output_weight(), /*bias=*/{}, quantization_);
  // Added after the product, as transformers does (lm_head(x) + final_logits_bias).
  return output_bias_.defined() ? logits + output_bias_ : logits;
}

at::Tensor TransformerImpl::decode(const at::Tensor& tgt_in_ids, const EncoderOutput& encoded) {
  TORCH_CHECK(tgt_in_ids.dim() == 2, "decode: expected tgt_in_ids [B, T], found ",
              tgt_in_ids.sizes());
  const at::Tensor mask = attention_mask_from_padding(encoded.src_pad_mask);
  at::Tensor x = decoder_embed_(tgt_in_ids);
  const bool recompute = recomputes_layers();
  for (DecoderLayer& layer : decoder_layers_) {
    x = run_layer(layer, x, encoded.out, mask, recompute);
  }
  return project(x);
}

at::Tensor TransformerImpl::forward(const at::Tensor& src_ids, const at::Tensor& tgt_in_ids) {
  return decode(tgt_in_ids, encode(src_ids));
}

DecoderState TransformerImpl::init_state(const EncoderOutput& encoded, int64_t rows_per_source) {
  TORCH_CHECK(rows_per_source >= 1, "init_state: rows_per_source must be >= 1, found ",
              rows_per_source);
  DecoderState state;
  state.rows_per_source = rows_per_source;
  state.src_mask = attention_mask_from_padding(encoded.src_pad_mask);
  state.self_attention.resize(decoder_layers_.size());
  for (DecoderLayer& layer : decoder_layers_) {
    // Contiguous [B, heads, S, d_head] (the projection's heads are strided): every step's
    // attention then reads each head's block in place instead of copying it.
    KeyValue kv = layer->project_memory(encoded.out);
    state.cross_attention.push_back({kv.key.contiguous(), kv.value.contiguous()});
  }
  if (options_.positions == PositionEncoding::kM2m100) {
    state.real_tokens =
        at::zeros({encoded.out.size(0) * rows_per_source},
                  at::TensorOptions().dtype(at::kLong).device(encoded.out.device()));
  }
  return state;
}

at::Tensor TransformerImpl::decode_step(const at::Tensor& last_tokens, DecoderState& state) {
  TORCH_CHECK(last_tokens.dim() == 1, "decode_step: expected last_tokens [B], found ",
              last_tokens.sizes());
  TORCH_CHECK(state.cross_attention.size() == decoder_layers_.size(),
              "decode_step: state not made by init_state of this model");
  at::Tensor x = decoder_embed_(last_tokens.unsqueeze(1), state.step, state.real_tokens);
  for (size_t i = 0; i < decoder_layers_.size(); ++i) {
    x = decoder_layers_[i]->step(x, state.self_attention[i], state.cross_attention[i],
                                 state.src_mask, state.rows_per_source);
  }
  ++state.step;
  if (state.real_tokens.defined()) state.real_tokens = state.real_tokens + last_tokens.ne(pad_id_);
  return project(x).squeeze(1);
}

void TransformerImpl::reorder_target_state(DecoderState& state, const at::Tensor& new_order) const {
  for (KeyValueCache& cache : state.self_attention) cache.reorder(new_order);
  select_rows(state.real_tokens, new_order);
}

void TransformerImpl::reorder_state(DecoderState& state, const at::Tensor& new_order) const {
  TORCH_CHECK(state.rows_per_source == 1, "reorder_state: a state of ", state.rows_per_source,
              " rows per source needs the sources' order too");
  reorder_state(state, new_order, new_order);
}

void TransformerImpl::reorder_state(DecoderState& state, const at::Tensor& row_order,
                                    const at::Tensor& source_order) const {
  TORCH_CHECK(row_order.size(0) == source_order.size(0) * state.rows_per_source,
              "reorder_state: ", row_order.size(0), " rows for ", source_order.size(0),
              " sources of ", state.rows_per_source, " rows each");
  reorder_target_state(state, row_order);
  for (KeyValue& kv : state.cross_attention) {
    select_rows(kv.key, source_order);
    select_rows(kv.value, source_order);
  }
  select_rows(state.src_mask, source_order);
}

int64_t TransformerImpl::parameter_count() const {
  int64_t count = 0;
  for (const at::Tensor& p : parameters()) count += p.numel();
  return count;
}

}  // namespace nmt::model
