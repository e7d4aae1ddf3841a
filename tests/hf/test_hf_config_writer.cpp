// hf/hf_config_writer: our model options as a transformers config.json, the inverse of
// parse_hf_config; models no transformers architecture reproduces are refused, naming keys.
#include "catch_torch.h"  // first: see the header

#include <string>

#include <nlohmann/json.hpp>

#include "hf/hf_config.h"
#include "hf/hf_config_writer.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::hf::hf_config_for;
using nmt::hf::hf_config_json;
using nmt::hf::HfModelConfig;
using nmt::hf::HfModelType;
using nmt::hf::HfVocabularyIds;
using nmt::hf::parse_hf_config;
namespace model = nmt::model;

namespace {

/// Every field of two configs equal (dropout rates to the bit: JSON keeps doubles exactly).
void check_same(const HfModelConfig& a, const HfModelConfig& b) {
  CHECK(a.type == b.type);
  CHECK(a.src_vocab_size == b.src_vocab_size);
  CHECK(a.tgt_vocab_size == b.tgt_vocab_size);
  CHECK(a.pad_id == b.pad_id);
  CHECK(a.eos_id == b.eos_id);
  CHECK(a.bos_id == b.bos_id);
  CHECK(a.decoder_start_id == b.decoder_start_id);
  const model::ModelOptions &x = a.model, &y = b.model;
  CHECK(x.encoder_layers == y.encoder_layers);
  CHECK(x.decoder_layers == y.decoder_layers);
  CHECK(x.d_model == y.d_model);
  CHECK(x.heads == y.heads);
  CHECK(x.ffn_dim == y.ffn_dim);
  CHECK(x.dropout == y.dropout);
  CHECK(x.attention_dropout == y.attention_dropout);
  CHECK(x.activation_dropout == y.activation_dropout);
  CHECK(x.activation == y.activation);
  CHECK(x.norm == y.norm);
  CHECK(x.positions == y.positions);
  CHECK(x.max_positions == y.max_positions);
  CHECK(x.tie_embeddings == y.tie_embeddings);
  CHECK(x.scale_embeddings == y.scale_embeddings);
  CHECK(x.output_bias == y.output_bias);
  CHECK(x.decoder_start == y.decoder_start);
}

/// A post-norm model with marian positions, the shape of configs/transformer-base.yaml.
model::ModelOptions post_norm_marian() {
  model::ModelOptions m;
  m.norm = model::NormPosition::kPost;
  m.positions = model::PositionEncoding::kMarian;
  return m;
}

/// A pre-norm model with m2m100 positions, the shape of configs/demo.yaml.
model::ModelOptions pre_norm_m2m100() {
  model::ModelOptions m;
  m.encoder_layers = 2;
  m.decoder_layers = 3;
  m.d_model = 192;
  m.heads = 4;
  m.ffn_dim = 768;
  m.norm = model::NormPosition::kPre;
  m.positions = model::PositionEncoding::kM2m100;
  return m;
}

const HfVocabularyIds kJoint{8000, 8000, 0, 3, 2};

}  // namespace

TEST_CASE("parse_hf_config reads back what hf_config_json writes", "[hf]") {
  SECTION("post-norm, marian positions, one shared table") {
    model::ModelOptions m = post_norm_marian();
    m.activation = model::Activation::kSilu;
    m.dropout = 0.3;
    const HfModelConfig c = hf_config_for(m, kJoint);
    CHECK(c.type == HfModelType::kMarian);
    check_same(parse_hf_config(hf_config_json(c, "float32"), "written"), c);
  }
  SECTION("marian with separate vocabularies, untied or decoder-tied, gelu, unscaled") {
    for (model::TiedEmbeddings tie :
         {model::TiedEmbeddings::kNone, model::TiedEmbeddings::kDecoder}) {
      model::ModelOptions m = post_norm_marian();
      m.tie_embeddings = tie;
      m.activation = model::Activation::kGelu;
      m.scale_embeddings = false;
      m.decoder_start = model::DecoderStart::kPad;
      const HfModelConfig c = hf_config_for(m, {8000, 6000, 0, 3, 2});
      const nlohmann::ordered_json j = hf_config_json(c, "float32");
      CHECK(j.at("share_encoder_decoder_embeddings") == false);
      CHECK(j.at("decoder_vocab_size") == 6000);
      CHECK(j.at("decoder_start_token_id") == 0);
      check_same(parse_hf_config(j, "written"), c);
    }
  }
  SECTION("pre-norm, m2m100 positions, relu, each decoder start") {
    for (model::DecoderStart start :
         {model::DecoderStart::kBos, model::DecoderStart::kEos, model::DecoderStart::kPad}) {
      model::ModelOptions m = pre_norm_m2m100();
      m.decoder_start = start;
      const HfModelConfig c = hf_config_for(m, kJoint);
      CHECK(c.type == HfModelType::kM2m100);
      check_same(parse_hf_config(hf_config_json(c, "float32"), "written"), c);
    }
  }
  SECTION("an imported OPUS-MT config, written again") {
    const auto opus = nlohmann::ordered_json::parse(R"({
      "activation_function": "swish", "d_model": 512, "decoder_attention_heads": 8,
      "decoder_ffn_dim": 2048, "decoder_layers": 6, "decoder_start_token_id": 58100,
      "decoder_vocab_size": 58101, "encoder_attention_heads": 8, "encoder_ffn_dim": 2048,
      "encoder_layers": 6, "eos_token_id": 0, "max_position_embeddings": 512,
      "model_type": "marian", "pad_token_id": 58100, "scale_embedding": true,
      "share_encoder_decoder_embeddings": true, "vocab_size": 58101})");
    const HfModelConfig c = parse_hf_config(opus, "config.json");
    check_same(parse_hf_config(hf_config_json(c, "float32"), "written"), c);
  }
}

TEST_CASE("a Marian export has a logits bias even when our model has none", "[hf]") {
  model::ModelOptions m = post_norm_marian();
  m.output_bias = false;
  CHECK(hf_config_for(m, kJoint).model.output_bias);
  CHECK(hf_config_json(hf_config_for(m, kJoint), "float32").at("forced_eos_token_id").is_null());
}

TEST_CASE("a model no transformers architecture reproduces is refused, naming its keys", "[hf]") {
  model::ModelOptions learned = post_norm_marian();
  learned.positions = model::PositionEncoding::kLearned;
  CHECK_THROWS_AS(hf_config_for(learned, kJoint), nmt::CheckpointError);
  CHECK_THROWS_WITH(hf_config_for(learned, kJoint),
                    Contains("model.norm: post with model.positions: learned") &&
                        Contains("model.positions: marian"));

  model::ModelOptions sinusoidal = pre_norm_m2m100();
  sinusoidal.positions = model::PositionEncoding::kSinusoidal;
  CHECK_THROWS_WITH(hf_config_for(sinusoidal, kJoint),
                    Contains("model.positions: sinusoidal") && Contains("model.positions: m2m100"));

  model::ModelOptions pre_marian = pre_norm_m2m100();
  pre_marian.positions = model::PositionEncoding::kMarian;
  CHECK_THROWS_WITH(hf_config_for(pre_marian, kJoint),
                    Contains("model.norm: pre with model.positions: marian"));

  model::ModelOptions untied = pre_norm_m2m100();
  untied.tie_embeddings = model::TiedEmbeddings::kDecoder;
  untied.output_bias = true;
  CHECK_THROWS_WITH(
      hf_config_for(untied, {8000, 6000, 0, 3, 2}),
      Contains("model.tie_embeddings: decoder") && Contains("model.output_bias: true"));
}

TEST_CASE("a config its model type cannot express is not written", "[hf]") {
  HfModelConfig c = hf_config_for(pre_norm_m2m100(), kJoint);
  c.model.output_bias = true;
  CHECK_THROWS_AS(hf_config_json(c, "float32"), nmt::CheckpointError);
}
