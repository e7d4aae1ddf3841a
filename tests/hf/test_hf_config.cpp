// hf/hf_config: a transformers config.json of model_type marian or m2m_100 as our
// ModelOptions, and every value we do not reproduce exactly refused, naming key and value.
#include "catch_torch.h"  // first: see the header

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hf/hf_config.h"
#include "util/error.h"

using nmt::hf::HfModelConfig;
using nmt::hf::HfModelType;
using nmt::hf::parse_hf_config;
using Json = nlohmann::ordered_json;
namespace model = nmt::model;

namespace {

/// config.json of an OPUS-MT model as transformers 4.x converted it (keys of the day kept).
Json opus_mt_config() {
  return Json::parse(R"({
    "activation_function": "swish", "add_bias_logits": false, "add_final_layer_norm": false,
    "architectures": ["MarianMTModel"], "attention_dropout": 0.0, "bad_words_ids": [[58100]],
    "bos_token_id": 0, "d_model": 512, "decoder_attention_heads": 8, "decoder_ffn_dim": 2048,
    "decoder_layerdrop": 0.0, "decoder_layers": 6, "decoder_start_token_id": 58100,
    "decoder_vocab_size": 58101, "dropout": 0.1, "encoder_attention_heads": 8,
    "encoder_ffn_dim": 2048, "encoder_layerdrop": 0.0, "encoder_layers": 6, "eos_token_id": 0,
    "forced_eos_token_id": 0, "init_std": 0.02, "is_encoder_decoder": true,
    "max_position_embeddings": 512, "model_type": "marian", "normalize_before": false,
    "normalize_embedding": false, "num_hidden_layers": 6, "pad_token_id": 58100,
    "scale_embedding": true, "share_encoder_decoder_embeddings": true,
    "static_position_embeddings": true, "transformers_version": "4.22.0.dev0",
    "use_cache": true, "vocab_size": 58101})");
}

/// config.json of an NLLB-200 distilled model (m2m100 architecture).
Json nllb_config() {
  return Json::parse(R"({
    "activation_dropout": 0.0, "activation_function": "relu", "attention_dropout": 0.1,
    "bos_token_id": 0, "d_model": 1024, "decoder_attention_heads": 16, "decoder_ffn_dim": 4096,
    "decoder_layerdrop": 0, "decoder_layers": 12, "decoder_start_token_id": 2, "dropout": 0.1,
    "encoder_attention_heads": 16, "encoder_ffn_dim": 4096, "encoder_layerdrop": 0,
    "encoder_layers": 12, "eos_token_id": 2, "init_std": 0.02, "is_encoder_decoder": true,
    "max_position_embeddings": 1024, "model_type": "m2m_100", "pad_token_id": 1,
    "scale_embedding": true, "vocab_size": 256206})");
}

}  // namespace

TEST_CASE("an OPUS-MT config.json is a post-norm swish model with marian positions", "[hf]") {
  const HfModelConfig c = parse_hf_config(opus_mt_config(), "config.json");
  CHECK(c.type == HfModelType::kMarian);
  const model::ModelOptions& m = c.model;
  CHECK(m.encoder_layers == 6);
  CHECK(m.decoder_layers == 6);
  CHECK(m.d_model == 512);
  CHECK(m.heads == 8);
  CHECK(m.ffn_dim == 2048);
  CHECK(m.activation == model::Activation::kSilu);
  CHECK(m.norm == model::NormPosition::kPost);
  CHECK(m.positions == model::PositionEncoding::kMarian);
  CHECK(m.max_positions == 512);
  CHECK(m.tie_embeddings == model::TiedEmbeddings::kAll);
  CHECK(m.scale_embeddings);
  CHECK(m.output_bias);
  CHECK(m.decoder_start == model::DecoderStart::kPad);
  CHECK(m.dropout == 0.1);
  CHECK(c.src_vocab_size == 58101);
  CHECK(c.tgt_vocab_size == 58101);
  CHECK(c.pad_id == 58100);
  CHECK(c.eos_id == 0);
  CHECK(c.decoder_start_id == 58100);
}

TEST_CASE("an NLLB config.json is a pre-norm relu model with m2m100 positions", "[hf]") {
  const HfModelConfig c = parse_hf_config(nllb_config(), "config.json");
  CHECK(c.type == HfModelType::kM2m100);
  const model::ModelOptions& m = c.model;
  CHECK(m.activation == model::Activation::kRelu);
  CHECK(m.norm == model::NormPosition::kPre);
  CHECK(m.positions == model::PositionEncoding::kM2m100);
  CHECK(m.tie_embeddings == model::TiedEmbeddings::kAll);
  CHECK_FALSE(m.output_bias);
  CHECK(m.decoder_start == model::DecoderStart::kEos);
  CHECK(m.attention_dropout == 0.1);
  CHECK(c.src_vocab_size == 256206);
  CHECK(c.pad_id == 1);
  CHECK(c.bos_id == 0);
}

TEST_CASE("marian embedding sharing and tying map onto tie_embeddings", "[hf]") {
  Json j = opus_mt_config();
  j["share_encoder_decoder_embeddings"] = false;
  j["decoder_vocab_size"] = 60000;
  HfModelConfig c = parse_hf_config(j, "config.json");
  CHECK(c.model.tie_embeddings == model::TiedEmbeddings::kDecoder);
  CHECK(c.tgt_vocab_size == 60000);
  j["tie_word_embeddings"] = false;
  c = parse_hf_config(j, "config.json");
  CHECK(c.model.tie_embeddings == model::TiedEmbeddings::kNone);
  j["activation_function"] = "gelu";
  j["scale_embedding"] = false;
  c = parse_hf_config(j, "config.json");
  CHECK(c.model.activation == model::Activation::kGelu);
  CHECK_FALSE(c.model.scale_embeddings);
}

TEST_CASE("config values we do not reproduce exactly are refused, naming key and value", "[hf]") {
  struct Refusal {
    const char* base;  // "marian" or "m2m_100"
    const char* key;
    Json value;
    const char* shown;  // how the message shows key = value
  };
  const std::vector<Refusal> refusals = {
      {"marian", "model_type", "bart", "model_type = \"bart\""},
      {"marian", "activation_function", "gelu_new", "activation_function = \"gelu_new\""},
      {"m2m_100", "activation_function", "tanh", "activation_function = \"tanh\""},
      {"marian", "normalize_before", true, "normalize_before = true"},
      {"m2m_100", "normalize_before", false, "normalize_before = false"},
      {"marian", "add_final_layer_norm", true, "add_final_layer_norm = true"},
      {"m2m_100", "layernorm_embedding", true, "layernorm_embedding = true"},
      {"marian", "normalize_embedding", true, "normalize_embedding = true"},
      {"marian", "add_bias_logits", true, "add_bias_logits = true"},
      {"marian", "static_position_embeddings", false, "static_position_embeddings = false"},
      {"m2m_100", "position_embedding_type", "relative_key",
       "position_embedding_type = \"relative_key\""},
      {"marian", "decoder_attention_heads", 4, "decoder_attention_heads = 4"},
      {"m2m_100", "decoder_ffn_dim", 1024, "decoder_ffn_dim = 1024"},
      {"m2m_100", "tie_word_embeddings", false, "tie_word_embeddings = false"},
      {"marian", "decoder_vocab_size", 1000, "decoder_vocab_size = 1000"},
      {"marian", "decoder_start_token_id", 5, "decoder_start_token_id = 5"},
      {"m2m_100", "is_encoder_decoder", false, "is_encoder_decoder = false"},
      {"m2m_100", "pad_token_id", 300000, "pad_token_id = 300000"},
      {"marian", "encoder_attention_heads", 7, "encoder_attention_heads = 7"},
  };
  for (const Refusal& r : refusals) {
    INFO(r.base << ": " << r.shown);
    Json j = std::string(r.base) == "marian" ? opus_mt_config() : nllb_config();
    j[r.key] = r.value;
    if (std::string(r.key) == "encoder_attention_heads") j["decoder_attention_heads"] = r.value;
    CHECK_THROWS_AS(parse_hf_config(j, "dir/config.json"), nmt::CheckpointError);
    CHECK_THROWS_WITH(
        parse_hf_config(j, "dir/config.json"),
        Catch::Matchers::StartsWith("dir/config.json: ") && Catch::Matchers::Contains(r.shown));
  }
}

TEST_CASE("config values of the wrong JSON type are named with what was expected", "[hf]") {
  Json j = opus_mt_config();
  j["d_model"] = "512";
  CHECK_THROWS_WITH(parse_hf_config(j, "config.json"),
                    "config.json: d_model = \"512\": expected an integer");
  j = nllb_config();
  j.erase("model_type");
  CHECK_THROWS_WITH(parse_hf_config(j, "config.json"), "config.json: no key \"model_type\"");
}

TEST_CASE("config.json as the 2020-2022 conversions wrote it still reads", "[hf]") {
  // OPUS-MT's keys of the day (labels, generation settings, add_bias_logits false beside the
  // stored final_logits_bias), and M2M100-418M's (layerdrop 0.05, beams, early stopping).
  Json marian = opus_mt_config();
  const Json old_keys = Json::parse(R"({
        "_name_or_path": "/tmp/Helsinki-NLP/opus-mt-en-de", "_num_labels": 3,
        "classif_dropout": 0.0, "classifier_dropout": 0.0, "extra_pos_embeddings": 58101,
        "gradient_checkpointing": false, "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
        "label2id": {"LABEL_0": 0, "LABEL_1": 1}, "max_length": 512, "num_beams": 4,
        "output_past": true, "tokenizer_class": "MarianTokenizer"})");
  for (const auto& [key, value] : old_keys.items()) marian[key] = value;
  const HfModelConfig c = parse_hf_config(marian, "config.json");
  CHECK(c.model.output_bias);
  CHECK(c.model.d_model == 512);
  CHECK(c.tokenizer_class == "MarianTokenizer");
  const Json m2m = Json::parse(R"({
    "_name_or_path": "hf_models/m2m100_418M", "activation_dropout": 0.0,
    "activation_function": "relu", "architectures": ["M2M100ForConditionalGeneration"],
    "attention_dropout": 0.1, "bos_token_id": 0, "d_model": 1024, "decoder_attention_heads": 16,
    "decoder_ffn_dim": 4096, "decoder_layerdrop": 0.05, "decoder_layers": 12,
    "decoder_start_token_id": 2, "dropout": 0.1, "early_stopping": true,
    "encoder_attention_heads": 16, "encoder_ffn_dim": 4096, "encoder_layerdrop": 0.05,
    "encoder_layers": 12, "eos_token_id": 2, "gradient_checkpointing": false, "init_std": 0.02,
    "is_encoder_decoder": true, "max_length": 200, "max_position_embeddings": 1024,
    "model_type": "m2m_100", "num_beams": 5, "num_hidden_layers": 12, "pad_token_id": 1,
    "scale_embedding": true, "transformers_version": "4.4.0.dev0", "use_cache": true,
    "vocab_size": 128112})");
  const HfModelConfig m = parse_hf_config(m2m, "config.json");
  CHECK(m.type == HfModelType::kM2m100);
  CHECK(m.model.encoder_layers == 12);
  CHECK(m.encoder_layerdrop == 0.05);  // read for import-hf's warning
  CHECK(m.decoder_layerdrop == 0.05);
  CHECK(m.tokenizer_class.empty());
}
