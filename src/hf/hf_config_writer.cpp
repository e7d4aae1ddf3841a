#include "hf/hf_config_writer.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace nmt::hf {
namespace {

using Json = nlohmann::ordered_json;

// The YAML spellings of the model options (config/run_config.cpp), for messages that name
// the keys to change.
const char* norm_name(model::NormPosition n) {
  return n == model::NormPosition::kPre ? "pre" : "post";
}

const char* positions_name(model::PositionEncoding p) {
  switch (p) {
    case model::PositionEncoding::kSinusoidal:
      return "sinusoidal";
    case model::PositionEncoding::kLearned:
      return "learned";
    case model::PositionEncoding::kMarian:
      return "marian";
    case model::PositionEncoding::kM2m100:
      return "m2m100";
  }
  return "?";
}

const char* tie_name(model::TiedEmbeddings t) {
  switch (t) {
    case model::TiedEmbeddings::kNone:
      return "none";
    case model::TiedEmbeddings::kDecoder:
      return "decoder";
    case model::TiedEmbeddings::kAll:
      return "all";
  }
  return "?";
}

/// transformers' activation_function name of ours (ACT2FN: "swish" is nn.SiLU).
const char* activation_name(model::Activation a) {
  switch (a) {
    case model::Activation::kRelu:
      return "relu";
    case model::Activation::kGelu:
      return "gelu";
    case model::Activation::kSilu:
      return "swish";
  }
  return "?";
}

/// What a model must be to export, in the keys users set.
constexpr const char* kExportable =
    "exportable are model.norm: post with model.positions: marian (MarianMT), or model.norm: "
    "pre with model.positions: m2m100, model.tie_embeddings: all and model.output_bias: false "
    "(M2M100)";

}  // namespace

HfModelConfig hf_config_for(const model::ModelOptions& m, const HfVocabularyIds& vocab) {
  std::vector<std::string> problems;
  HfModelConfig out;
  const bool post = m.norm == model::NormPosition::kPost;
  if (post && m.positions == model::PositionEncoding::kMarian) {
    out.type = HfModelType::kMarian;
  } else if (!post && m.positions == model::PositionEncoding::kM2m100) {
    out.type = HfModelType::kM2m100;
    if (m.tie_embeddings != model::TiedEmbeddings::kAll)
      problems.push_back(
          fmt::format("model.tie_embeddings: {} (M2M100 has one table for encoder, "
                      "decoder and output)",
                      tie_name(m.tie_embeddings)));
    if (m.output_bias) problems.push_back("model.output_bias: true (M2M100 has no logits bias)");
  } else {
    std::string why;
    switch (m.positions) {
      case model::PositionEncoding::kSinusoidal:
        why =
            "transformers has no such table: M2M100's gives position t the angle of t + pad id "
            "+ 1, MarianMT's other frequencies";
        break;
      case model::PositionEncoding::kLearned:
        why = "transformers has learned positions only with a LayerNorm on the embeddings (BART)";
        break;
      default:
        why = fmt::format("model.positions: {} goes with model.norm: {} in transformers",
                          positions_name(m.positions),
                          m.positions == model::PositionEncoding::kMarian ? "post" : "pre");
        break;
    }
    problems.push_back(fmt::format("model.norm: {} with model.positions: {} ({})",
                                   norm_name(m.norm), positions_name(m.positions), why));
  }
  NMT_CHECK(problems.empty(), CheckpointError,
            "no transformers architecture computes this model: {}; {}", fmt::join(problems, "; "),
            kExportable);

  out.model = m;
  // MarianMTModel always adds final_logits_bias; a model without one exports zeros.
  out.model.output_bias = out.type == HfModelType::kMarian;
  out.src_vocab_size = vocab.src_vocab_size;
  out.tgt_vocab_size = vocab.tgt_vocab_size;
  out.pad_id = vocab.pad_id;
  out.eos_id = vocab.eos_id;
  out.bos_id = vocab.bos_id;
  out.decoder_start_id =
      model::decoder_start_id(m.decoder_start, vocab.bos_id, vocab.eos_id, vocab.pad_id);
  return out;
}

Json hf_config_json(const HfModelConfig& c, std::string_view dtype) {
  const model::ModelOptions& m = c.model;
  const bool marian = c.type == HfModelType::kMarian;
  // The fixed parts of each type, which config.json cannot change (parse_hf_config sets them).
  NMT_CHECK(
      m.norm == (marian ? model::NormPosition::kPost : model::NormPosition::kPre) &&
          m.positions ==
              (marian ? model::PositionEncoding::kMarian : model::PositionEncoding::kM2m100) &&
          m.output_bias == marian && (marian || m.tie_embeddings == model::TiedEmbeddings::kAll),
      CheckpointError,
      "a {} config.json cannot say model.norm: {}, model.positions: {}, model.output_bias: "
      "{}, model.tie_embeddings: {}",
      hf_model_type_name(c.type), norm_name(m.norm), positions_name(m.positions), m.output_bias,
      tie_name(m.tie_embeddings));
  Json j;
  j["architectures"] = {marian ? "MarianMTModel" : "M2M100ForConditionalGeneration"};
  j["model_type"] = hf_model_type_name(c.type);
  j["is_encoder_decoder"] = true;
  j["vocab_size"] = c.src_vocab_size;
  if (marian) {
    j["decoder_vocab_size"] = c.tgt_vocab_size;
    j["share_encoder_decoder_embeddings"] = m.tie_embeddings == model::TiedEmbeddings::kAll;
  }
  j["tie_word_embeddings"] = m.tie_embeddings != model::TiedEmbeddings::kNone;
  j["d_model"] = m.d_model;
  j["encoder_layers"] = m.encoder_layers;
  j["decoder_layers"] = m.decoder_layers;
  j["encoder_attention_heads"] = m.heads;
  j["decoder_attention_heads"] = m.heads;
  j["encoder_ffn_dim"] = m.ffn_dim;
  j["decoder_ffn_dim"] = m.ffn_dim;
  j["activation_function"] = activation_name(m.activation);
  j["dropout"] = m.dropout;
  j["attention_dropout"] = m.attention_dropout;
  j["activation_dropout"] = m.activation_dropout;
  j["encoder_layerdrop"] = 0.0;  // we never drop layers
  j["decoder_layerdrop"] = 0.0;
  j["max_position_embeddings"] = m.max_positions;
  j["scale_embedding"] = m.scale_embeddings;
  j["pad_token_id"] = c.pad_id;
  j["eos_token_id"] = c.eos_id;
  if (c.bos_id >= 0) j["bos_token_id"] = c.bos_id;
  j["decoder_start_token_id"] = c.decoder_start_id;
  // MarianConfig's default forced_eos_token_id is 0 (OPUS-MT's eos), a word of ours.
  j["forced_eos_token_id"] = nullptr;
  j["use_cache"] = true;
  j["dtype"] = dtype;
  return j;
}

}  // namespace nmt::hf
