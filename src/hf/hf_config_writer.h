#pragma once
// Our model as a transformers model: which architecture computes exactly what ours computes,
// and its config.json (the inverse of parse_hf_config, hf_config.h). Checked against the
// transformers 5.24 sources:
//
//   marian   post-norm, no final LayerNorm; MarianSinusoidalPositionalEmbedding is our
//            kMarian table (sines then cosines, 10000^(-2i/d), rows from 0, not padding-aware);
//            one table, or separate encoder and decoder tables
//            (share_encoder_decoder_embeddings), the output tied to the decoder's or not
//            (tie_word_embeddings); final_logits_bias is our output_bias (zeros when we have
//            none).
//   m2m_100  pre-norm with a LayerNorm after each stack (encoder.layer_norm, decoder.layer_norm);
//            M2M100SinusoidalPositionalEmbedding is our kM2m100 table (our kSinusoidal
//            frequencies, rows from pad_token_id + 1, padding-aware); one shared table for
//            encoder, decoder and output; no logits bias.
//
// Both: activation_function relu (nn.ReLU), gelu (GELUActivation: erf, as at::gelu), swish
// (nn.SiLU); embed_scale sqrt(d_model) when scale_embedding; nn.LayerNorm with eps 1e-5.
// Nothing else reproduces ours: our kSinusoidal table gives position t row t, M2M100 row
// t + pad + 1 (another angle); learned positions exist only in architectures with a LayerNorm
// on the embeddings (BART, mBART). Such models are refused, naming the keys that would make
// them exportable.

#include <cstdint>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "hf/hf_config.h"
#include "model/model_options.h"

namespace nmt::hf {

/// The vocabulary side of an export: table sizes and special ids (the target's).
struct HfVocabularyIds {
  int64_t src_vocab_size = 0;  ///< rows of the encoder's token table
  int64_t tgt_vocab_size = 0;  ///< rows of the decoder's
  int64_t pad_id = 0;          ///< padding id (the embeddings' padding row)
  int64_t eos_id = 3;          ///< end of sentence
  int64_t bos_id = 2;          ///< beginning of sentence (never generated); -1: none
};

/// The transformers architecture that computes exactly what `model` computes, with its
/// special ids. A Marian export keeps output_bias = true (transformers' final_logits_bias;
/// the exporter writes zeros when our model has none). Throws CheckpointError naming the
/// model.* keys with their values and the settings that would make the model exportable.
HfModelConfig hf_config_for(const model::ModelOptions& model, const HfVocabularyIds& vocab);

/// The config.json of `config`, whose weights are stored as `dtype` ("float32", "float16",
/// "bfloat16": the dtype transformers loads them in): parse_hf_config(hf_config_json(c, ...))
/// gives c back for any c that hf_config_for or parse_hf_config made. Throws CheckpointError for
/// a config whose norm, positions or logits bias its model type does not have.
nlohmann::ordered_json hf_config_json(const HfModelConfig& config, std::string_view dtype);

}  // namespace nmt::hf
