#include "hf/hf_config.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/file_kind.h"

namespace nmt::hf {
namespace {

using Json = nlohmann::ordered_json;

/// A config.json's keys with the defaults of the transformers config class they belong to
/// (save_pretrained leaves out the values equal to PretrainedConfig's, e.g.
/// tie_word_embeddings: true); every miss or type error names the file and the key.
class ConfigReader {
 public:
  ConfigReader(const Json& json, std::string origin) : json_(json), origin_(std::move(origin)) {}

  /// Whether the config has the key (with a non-null value).
  bool has(const char* key) const { return json_.contains(key) && !json_.at(key).is_null(); }

  /// The JSON text of a key's value, for messages.
  std::string text(const char* key) const { return has(key) ? json_.at(key).dump() : "null"; }

  int64_t integer(const char* key, std::optional<int64_t> fallback) const {
    if (!has(key)) {
      NMT_CHECK(fallback.has_value(), CheckpointError, "{}: no key \"{}\"", origin_, key);
      return *fallback;
    }
    const Json& value = json_.at(key);
    NMT_CHECK(value.is_number_integer(), CheckpointError, "{}: {} = {}: expected an integer",
              origin_, key, value.dump());
    return value.get<int64_t>();
  }

  double real(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const Json& value = json_.at(key);
    NMT_CHECK(value.is_number(), CheckpointError, "{}: {} = {}: expected a number", origin_, key,
              value.dump());
    return value.get<double>();
  }

  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const Json& value = json_.at(key);
    NMT_CHECK(value.is_boolean(), CheckpointError, "{}: {} = {}: expected true or false", origin_,
              key, value.dump());
    return value.get<bool>();
  }

  std::string string(const char* key, std::optional<std::string> fallback) const {
    if (!has(key)) {
      NMT_CHECK(fallback.has_value(), CheckpointError, "{}: no key \"{}\"", origin_, key);
      return *fallback;
    }
    const Json& value = json_.at(key);
    NMT_CHECK(value.is_string(), CheckpointError, "{}: {} = {}: expected a string", origin_, key,
              value.dump());
    return value.get<std::string>();
  }

  /// Refuses `key` with its value: what we cannot reproduce, and why.
  [[noreturn]] void refuse(const char* key, std::string_view why) const {
    NMT_THROW(CheckpointError, "{}: {} = {} is not supported: {}", origin_, key, text(key), why);
  }

  /// Refuses a boolean key present with a value other than `expected`.
  void require_boolean(const char* key, bool expected, std::string_view why) const {
    if (has(key) && boolean(key, expected) != expected) refuse(key, why);
  }

 private:
  const Json& json_;
  std::string origin_;
};

/// The transformers activation_function names we compute exactly.
model::Activation activation_of(const ConfigReader& c, const std::string& name) {
  if (name == "relu") return model::Activation::kRelu;
  if (name == "gelu") return model::Activation::kGelu;  // GELUActivation: erf, as at::gelu
  if (name == "swish" || name == "silu") return model::Activation::kSilu;
  c.refuse("activation_function", "the supported activations are relu, gelu (erf), swish, silu");
}

/// The default activation, dropout and special ids of each config class (transformers 5.x).
struct ClassDefaults {
  const char* activation;
  double attention_dropout;
  int64_t pad_id;
  int64_t eos_id;
  std::optional<int64_t> bos_id;
  int64_t decoder_start_id;
  bool scale_embedding;
  int64_t vocab_size;
};

constexpr ClassDefaults kMarianDefaults{"gelu", 0.0, 58100, 0, std::nullopt, 58100, false, 58101};
constexpr ClassDefaults kM2m100Defaults{"relu", 0.1, 1, 2, 0, 2, true, 128112};

/// model_type: the config class, and with it the architecture's conventions.
HfModelType model_type_of(const ConfigReader& c) {
  const std::string type = c.string("model_type", std::nullopt);
  if (type == "marian") return HfModelType::kMarian;
  if (type == "m2m_100") return HfModelType::kM2m100;
  c.refuse("model_type",
           "nmt-train imports marian (MarianMT, OPUS-MT) and m2m_100 (M2M100, "
           "NLLB-200) models");
}

/// What the architecture has no switch for in transformers, refused when a config says
/// otherwise (older configs carry these keys with the values of the type).
void refuse_other_architectures(const ConfigReader& c, bool marian) {
  c.require_boolean("is_encoder_decoder", true, "only encoder-decoder models are imported");
  c.require_boolean("normalize_before", !marian,
                    marian ? "MarianMT is post-norm" : "M2M100 is pre-norm");
  c.require_boolean(
      "add_final_layer_norm", !marian,
      marian ? "MarianMT has no final LayerNorm" : "M2M100 has a final LayerNorm after each stack");
  c.require_boolean("layernorm_embedding", false, "there is no LayerNorm on the embeddings");
  c.require_boolean("normalize_embedding", false, "there is no LayerNorm on the embeddings");
  c.require_boolean("add_bias_logits", false, "the logits bias is final_logits_bias (MarianMT)");
  if (marian) {
    c.require_boolean("static_position_embeddings", true,
                      "MarianMT's positions are a fixed sinusoidal table");
  }
  if (c.has("position_embedding_type") &&
      c.string("position_embedding_type", std::nullopt) != "absolute") {
    c.refuse("position_embedding_type", "only absolute sinusoidal positions are imported");
  }
}

/// Layers, width, heads and feed-forward width: one count for encoder and decoder each.
void read_shape(const ConfigReader& c, model::ModelOptions& m) {
  m.encoder_layers = c.integer("encoder_layers", 12);
  m.decoder_layers = c.integer("decoder_layers", 12);
  m.d_model = c.integer("d_model", 1024);
  m.heads = c.integer("encoder_attention_heads", 16);
  if (c.integer("decoder_attention_heads", 16) != m.heads) {
    c.refuse("decoder_attention_heads", "encoder_attention_heads is " + std::to_string(m.heads) +
                                            ", and nmt-train has one head count for both");
  }
  m.ffn_dim = c.integer("encoder_ffn_dim", 4096);
  if (c.integer("decoder_ffn_dim", 4096) != m.ffn_dim) {
    c.refuse("decoder_ffn_dim", "encoder_ffn_dim is " + std::to_string(m.ffn_dim) +
                                    ", and nmt-train has one feed-forward width for both");
  }
  if (m.encoder_layers < 1 || m.decoder_layers < 1) {
    c.refuse(m.encoder_layers < 1 ? "encoder_layers" : "decoder_layers",
             "expected at least one layer");
  }
  if (m.heads < 1 || m.d_model % m.heads != 0) {
    c.refuse("encoder_attention_heads",
             "expected a divisor of d_model = " + std::to_string(m.d_model));
  }
}

/// Dropout rates, activation, norm placement, positions, embedding scale and logits bias.
void read_computation(const ConfigReader& c, const ClassDefaults& defaults, bool marian,
                      model::ModelOptions& m) {
  m.dropout = c.real("dropout", 0.1);
  m.attention_dropout = c.real("attention_dropout", defaults.attention_dropout);
  m.activation_dropout = c.real("activation_dropout", 0.0);
  m.activation = activation_of(c, c.string("activation_function", defaults.activation));
  m.norm = marian ? model::NormPosition::kPost : model::NormPosition::kPre;
  m.positions = marian ? model::PositionEncoding::kMarian : model::PositionEncoding::kM2m100;
  m.max_positions = c.integer("max_position_embeddings", 1024);
  if (m.max_positions < 1) c.refuse("max_position_embeddings", "expected a positive count");
  m.scale_embeddings = c.boolean("scale_embedding", defaults.scale_embedding);
  m.output_bias = marian;         // MarianMTModel's final_logits_bias
  m.freeze_output_bias = marian;  // a buffer there: never trained
}

/// The token tables' sizes and which of them are one (model.tie_embeddings).
void read_embeddings(const ConfigReader& c, const ClassDefaults& defaults, bool marian,
                     HfModelConfig& out) {
  out.src_vocab_size = c.integer("vocab_size", defaults.vocab_size);
  out.tgt_vocab_size =
      marian ? c.integer("decoder_vocab_size", out.src_vocab_size) : out.src_vocab_size;
  const bool shared = !marian || c.boolean("share_encoder_decoder_embeddings", true);
  const bool tied_output = c.boolean("tie_word_embeddings", true);
  if (shared && out.tgt_vocab_size != out.src_vocab_size) {
    c.refuse("decoder_vocab_size",
             "share_encoder_decoder_embeddings needs it equal to "
             "vocab_size = " +
                 std::to_string(out.src_vocab_size));
  }
  if (shared && !tied_output) {
    // One table for encoder and decoder but a separate output matrix: no TiedEmbeddings mode.
    c.refuse("tie_word_embeddings",
             "with one embedding table for encoder and decoder, "
             "nmt-train ties the output projection to it too");
  }
  out.model.tie_embeddings = shared        ? model::TiedEmbeddings::kAll
                             : tied_output ? model::TiedEmbeddings::kDecoder
                                           : model::TiedEmbeddings::kNone;
}

/// The special ids, the decoder's start by its role, and the keys import-hf only reports.
void read_special_ids(const ConfigReader& c, const ClassDefaults& defaults, HfModelConfig& out) {
  out.pad_id = c.integer("pad_token_id", defaults.pad_id);
  out.eos_id = c.integer("eos_token_id", defaults.eos_id);
  out.bos_id = c.has("bos_token_id") ? c.integer("bos_token_id", std::nullopt)
                                     : defaults.bos_id.value_or(-1);
  out.decoder_start_id = c.integer("decoder_start_token_id", defaults.decoder_start_id);
  out.tokenizer_class = c.string("tokenizer_class", "");
  out.encoder_layerdrop = c.real("encoder_layerdrop", 0.0);
  out.decoder_layerdrop = c.real("decoder_layerdrop", 0.0);
  const int64_t smaller_vocab = std::min(out.src_vocab_size, out.tgt_vocab_size);
  if (out.pad_id < 0 || out.pad_id >= smaller_vocab)
    c.refuse("pad_token_id", "expected an id below the vocabulary sizes");
  if (out.eos_id < 0 || out.eos_id >= out.tgt_vocab_size)
    c.refuse("eos_token_id", "expected an id below the vocabulary size");
  // Its role, not its number, is what the model option stores: pad first (Marian's start is
  // its pad), then eos (M2M100's), then bos.
  if (out.decoder_start_id == out.pad_id) {
    out.model.decoder_start = model::DecoderStart::kPad;
  } else if (out.decoder_start_id == out.eos_id) {
    out.model.decoder_start = model::DecoderStart::kEos;
  } else if (out.decoder_start_id == out.bos_id) {
    out.model.decoder_start = model::DecoderStart::kBos;
  } else {
    c.refuse("decoder_start_token_id", "expected the pad, eos or bos token id");
  }
}

}  // namespace

std::string_view hf_model_type_name(HfModelType type) {
  return type == HfModelType::kMarian ? "marian" : "m2m_100";
}

HfModelConfig parse_hf_config(const nlohmann::ordered_json& json, const std::string& origin) {
  NMT_CHECK(json.is_object(), CheckpointError, "{}: expected a JSON object, found {}", origin,
            json.type_name());
  const ConfigReader c(json, origin);
  HfModelConfig out;
  out.type = model_type_of(c);
  const bool marian = out.type == HfModelType::kMarian;
  const ClassDefaults& defaults = marian ? kMarianDefaults : kM2m100Defaults;
  refuse_other_architectures(c, marian);
  read_shape(c, out.model);
  read_computation(c, defaults, marian, out.model);
  read_embeddings(c, defaults, marian, out);
  read_special_ids(c, defaults, out);
  return out;
}

HfModelConfig read_hf_config(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "config.json";
  const std::string kind = not_regular_file(file);
  NMT_CHECK(kind.empty(), CheckpointError, "{}: not a regular file ({}): refused rather than read",
            file.string(), kind);
  std::ifstream in(file);
  NMT_CHECK(in.good(), CheckpointError,
            "{}: cannot read it (a transformers model directory "
            "has a config.json)",
            file.string());
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::ordered_json json;
  try {
    json = nlohmann::ordered_json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    NMT_THROW(CheckpointError, "{}: not valid JSON: {}", file.string(), e.what());
  }
  return parse_hf_config(json, file.string());
}

}  // namespace nmt::hf
