#pragma once
// The Transformer encoder-decoder (Vaswani et al. 2017) with full (teacher-forced) decoding
// for training and cached incremental decoding for search. Ids are int64 [B, T], batch first,
// right-padded with pad_id.

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include "model/attention.h"
#include "model/embedding.h"
#include "model/layers.h"
#include "model/linear.h"
#include "model/model_options.h"

namespace nmt::model {

/// What the decoder needs from the encoder.
struct EncoderOutput {
  at::Tensor out;           ///< encoder states [B, S, d_model]
  at::Tensor src_pad_mask;  ///< bool [B, S], true at padding
};

/// Everything incremental decoding carries from one step to the next, per batch row.
///
/// Rows come in groups of rows_per_source consecutive rows that share one source (the beams of
/// a sentence): the encoder side (cross-attention keys and values, source mask) is held once
/// per source, not copied into every row, and a group's queries attend to it together (one
/// matrix product of rows_per_source queries instead of that many matrix-vector products).
struct DecoderState {
  std::vector<KeyValueCache> self_attention;  ///< per layer, per row: decoded positions
  std::vector<KeyValue> cross_attention;      ///< per layer, per source: encoder keys/values
  at::Tensor src_mask;                        ///< bool [sources, 1, 1, S], true: attendable
  int64_t rows_per_source = 1;                ///< decoder rows per source, consecutive
  int64_t step = 0;                       ///< positions decoded so far
  /// kM2m100 only: per row [B] (int64), the non-pad tokens fed so far, which its positions
  /// count (a pad start token takes none, as in teacher forcing); undefined otherwise.
  at::Tensor real_tokens;
};

/// Transformer encoder-decoder producing next-token logits.
class TransformerImpl : public torch::nn::Module {
 public:
  /// Builds and initializes the model; throws nmt::ConfigError for inconsistent options
  /// (e.g. tie_embeddings = all with different vocabulary sizes).
  TransformerImpl(const ModelOptions& options, int64_t src_vocab_size, int64_t tgt_vocab_size,
                  int64_t pad_id);

  /// Encodes src_ids [B, S].
  EncoderOutput encode(const at::Tensor& src_ids);
  /// Teacher-forced decoding of tgt_in_ids [B, T] (BOS-prefixed) -> logits [B, T, V].
  at::Tensor decode(const at::Tensor& tgt_in_ids, const EncoderOutput& encoded);
  /// encode then decode -> logits [B, T, V].
  at::Tensor forward(const at::Tensor& src_ids, const at::Tensor& tgt_in_ids);

  /// Starts incremental decoding of rows_per_source rows for each source of encoded [B, S, d]
  /// (B x rows_per_source rows): computes each layer's cross-attention keys/values once.
  DecoderState init_state(const EncoderOutput& encoded, int64_t rows_per_source = 1);
  /// Feeds last_tokens [R] at position state.step -> logits [R, V] for the next position.
  at::Tensor decode_step(const at::Tensor& last_tokens, DecoderState& state);
  /// Keeps rows new_order [R'] (int64 indices into the rows) of a state of one row per source,
  /// e.g. the sentences still decoding.
  void reorder_state(DecoderState& state, const at::Tensor& new_order) const;
  /// Keeps rows row_order [R'] and sources source_order [R' / rows_per_source] of state, each
  /// group of rows_per_source rows of row_order taken from rows of the source source_order
  /// gives for that group (not checked: a row would attend to another sentence's source).
  void reorder_state(DecoderState& state, const at::Tensor& row_order,
                     const at::Tensor& source_order) const;
  /// reorder_state of what depends on the target prefix only (self-attention caches, position
  /// counts), for rows that keep their source: beams moving within their sentence's rows.
  void reorder_target_state(DecoderState& state, const at::Tensor& new_order) const;

  /// Trainable parameters (shared tensors counted once).
  int64_t parameter_count() const;
  /// Source token table [src_vocab, d].
  at::Tensor source_embedding() const { return encoder_embed_->table()->weight; }
  /// Target token table [tgt_vocab, d].
  at::Tensor target_embedding() const { return decoder_embed_->table()->weight; }
  /// Output projection [tgt_vocab, d].
  at::Tensor output_weight() const;
  /// Bias [tgt_vocab] added to the logits; undefined unless options().output_bias.
  at::Tensor output_bias() const { return output_bias_; }
  /// The options this model was built with.
  const ModelOptions& options() const { return options_; }
  /// The padding id.
  int64_t pad_id() const { return pad_id_; }
  /// Activation checkpointing: in training with grad mode on, each encoder and decoder layer
  /// keeps only its inputs and runs its forward again in backward (model/recompute.h), for
  /// about one more forward per update. Not a shape option (not in ModelOptions): the model's
  /// parameters, and so its checkpoints, are the same either way.
  void set_activation_checkpointing(bool on) { activation_checkpointing_ = on; }
  /// Quantization-aware training and evaluation (model/fake_quantization.h): with kInt8 every
  /// matrix CTranslate2 stores as int8 (token embeddings, attention and feed-forward
  /// projections, the output projection) and the inputs of its int8 products are used as
  /// CTranslate2's int8 computes with them. Not a shape option: the parameters stay float.
  void set_quantization(Quantization quantization);
  /// What set_quantization set; kNone when built.
  Quantization quantization() const { return quantization_; }
  /// Packs the weights of the linear layers and of the output projection that have at least
  /// min_elements elements (min_packed_elements(): where it pays on this processor) for CPU float32
  /// inference (model/packed_linear.h): decoding's products skip MKL's per-call copy of the weight.
  /// Costs a second copy of those weights; a packed copy is used only while its weight is unchanged
  /// (a training step or load after this falls back to the unpacked product).
  void pack_weights(int64_t min_elements = min_packed_elements());

 private:
  /// Final pre-norm LayerNorm (if any) and output projection.
  at::Tensor project(const at::Tensor& x);
  /// Whether this forward recomputes its layers in backward.
  bool recomputes_layers() const;

  ModelOptions options_;
  int64_t pad_id_;
  InputEmbedding encoder_embed_{nullptr};
  InputEmbedding decoder_embed_{nullptr};
  torch::nn::ModuleList encoder_layers_list_{nullptr};
  torch::nn::ModuleList decoder_layers_list_{nullptr};
  std::vector<EncoderLayer> encoder_layers_;      ///< typed views of encoder_layers_list_
  std::vector<DecoderLayer> decoder_layers_;      ///< typed views of decoder_layers_list_
  torch::nn::LayerNorm encoder_norm_{nullptr};    ///< pre-norm only
  torch::nn::LayerNorm decoder_norm_{nullptr};    ///< pre-norm only
  Linear output_projection_{nullptr};             ///< untied only
  at::Tensor output_bias_;                        ///< options.output_bias only
  PackedWeight packed_output_;                    ///< see pack_weights
  bool activation_checkpointing_ = false;         ///< see set_activation_checkpointing
  Quantization quantization_ = Quantization::kNone;  ///< see set_quantization
};
TORCH_MODULE(Transformer);

}  // namespace nmt::model
