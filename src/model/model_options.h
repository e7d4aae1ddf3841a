#pragma once
// Shape of the Transformer encoder-decoder (YAML section `model`).

#include <cstdint>

namespace nmt::model {

/// Where layer normalization sits relative to each residual block.
enum class NormPosition { kPre, kPost };
/// How token positions are encoded.
enum class PositionEncoding {
  kSinusoidal,  ///< sines then cosines, frequencies 10000^(-i/(d/2-1)), row t for position t
  kLearned,     ///< a trained table
  kMarian,      ///< MarianMT's: sines then cosines, frequencies 10000^(-2i/d), from position 0
  kM2m100,      ///< M2M100's: the kSinusoidal table from row pad_id + 1, padding-aware (fairseq)
};
/// Which embedding matrices share one weight (a joint vocabulary is needed for kAll).
enum class TiedEmbeddings { kNone, kDecoder, kAll };
/// Feed-forward activation.
enum class Activation { kRelu, kGelu, kSilu };
/// The token the decoder input starts with, by its role in the target vocabulary.
enum class DecoderStart { kBos, kEos, kPad };
/// What a model's forward computes its matrix products and embeddings with
/// (model/fake_quantization.h); not a shape option: the parameters stay float either way.
enum class Quantization {
  kNone,  ///< float weights and inputs
  kInt8,  ///< CTranslate2's int8: weights per row, and the inputs of its int8 products per row
};

/// Transformer hyper-parameters; defaults are transformer-base (Vaswani et al. 2017).
struct ModelOptions {
  int64_t encoder_layers = 6;            ///< encoder blocks
  int64_t decoder_layers = 6;            ///< decoder blocks
  int64_t d_model = 512;                 ///< model width (embedding size)
  int64_t heads = 8;                     ///< attention heads; must divide d_model
  int64_t ffn_dim = 2048;                ///< feed-forward inner width
  double dropout = 0.1;                  ///< dropout on residual branches and embeddings
  double attention_dropout = 0.0;        ///< dropout on attention weights
  double activation_dropout = 0.0;       ///< dropout after the feed-forward activation
  Activation activation = Activation::kRelu;          ///< feed-forward activation
  NormPosition norm = NormPosition::kPost;            ///< pre-norm trains more stably when short
  PositionEncoding positions = PositionEncoding::kSinusoidal;  ///< position encoding
  int64_t max_positions = 1024;          ///< longest sequence the model accepts (tokens)
  TiedEmbeddings tie_embeddings = TiedEmbeddings::kAll;  ///< embedding weight sharing
  bool scale_embeddings = true;          ///< multiply embeddings by sqrt(d_model)
  bool output_bias = false;  ///< a trained bias [tgt_vocab] added to the logits (Marian's)
  /// Keeps output_bias fixed in training (transformers' final_logits_bias is a buffer, never
  /// trained); import-hf sets it for MarianMT.
  bool freeze_output_bias = false;
  DecoderStart decoder_start = DecoderStart::kBos;  ///< token fed first to the decoder
};

/// The id the decoder input starts with, given the target vocabulary's special ids.
constexpr int64_t decoder_start_id(DecoderStart start, int64_t bos, int64_t eos, int64_t pad) {
  return start == DecoderStart::kEos ? eos : start == DecoderStart::kPad ? pad : bos;
}

}  // namespace nmt::model
