// hf/hf_weights: transformers tensor names <-> our parameter names, both ways, and
// reading a model directory.
#include "catch_torch.h"  // first: see the header

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/utils.h>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_file.h"
#include "hf/hf_weights.h"
#include "model/transformer.h"
#include "test_support.h"
#include "util/error.h"

using nmt::hf::HfModelConfig;
using nmt::checkpoint::NamedTensors;
using Json = nlohmann::ordered_json;

namespace {

constexpr int64_t kVocab = 20;

/// A tiny config.json of `type` with extra keys.
Json tiny_config(const std::string& type, const Json& extra = Json::object()) {
  Json j = {{"model_type", type},           {"d_model", 8},
            {"encoder_layers", 2},          {"decoder_layers", 1},
            {"encoder_attention_heads", 2}, {"decoder_attention_heads", 2},
            {"encoder_ffn_dim", 16},        {"decoder_ffn_dim", 16},
            {"vocab_size", kVocab},         {"max_position_embeddings", 32}};
  if (type == "marian") {
    j["pad_token_id"] = kVocab - 1;
    j["decoder_start_token_id"] = kVocab - 1;
    j["eos_token_id"] = 0;
  }
  for (const auto& [key, value] : extra.items()) j[key] = value;
  return j;
}

HfModelConfig parse(const Json& j) { return nmt::hf::parse_hf_config(j, "config.json"); }

/// The configs every mapping test runs on: each tying mode, both norms, the logits bias.
std::vector<std::pair<std::string, HfModelConfig>> configs() {
  return {
      {"marian, shared", parse(tiny_config("marian"))},
      {"marian, separate tables, tied output",
       parse(tiny_config("marian", {{"share_encoder_decoder_embeddings", false},
                                    {"decoder_vocab_size", kVocab + 3}}))},
      {"marian, untied", parse(tiny_config("marian", {{"share_encoder_decoder_embeddings", false},
                                                      {"tie_word_embeddings", false}}))},
      {"m2m_100", parse(tiny_config("m2m_100"))},
  };
}

/// Our model of a config, its parameters random.
NamedTensors our_parameters(const HfModelConfig& c) {
  torch::manual_seed(5);
  nmt::model::Transformer model(c.model, c.src_vocab_size, c.tgt_vocab_size, c.pad_id);
  NamedTensors out;
  for (const auto& item : model->named_parameters())
    out.emplace_back(item.key(), at::randn(item.value().sizes()));
  return out;
}

std::map<std::string, at::Tensor> by_name(const NamedTensors& tensors) {
  return {tensors.begin(), tensors.end()};
}

}  // namespace

TEST_CASE("the sources name every parameter of our model, in its order", "[hf]") {
  for (const auto& [name, config] : configs()) {
    INFO(name);
    std::vector<std::string> ours, sources;
    for (const auto& [n, t] : our_parameters(config)) ours.push_back(n);
    for (const auto& source : nmt::hf::hf_tensor_sources(config))
      sources.push_back(source.name);
    CHECK(sources == ours);
  }
}

TEST_CASE("our parameters -> transformers -> ours is exact, with q/k/v in their rows", "[hf]") {
  for (const auto& [name, config] : configs()) {
    INFO(name);
    const NamedTensors ours = our_parameters(config);
    const NamedTensors hf = nmt::hf::to_hf_tensors(ours, config);
    const auto theirs = by_name(hf);
    const auto mine = by_name(ours);
    // The self-attention of encoder layer 1: rows q, k, v of our fused projection.
    const at::Tensor qkv = mine.at("encoder_layers.1.self_attn.qkv_proj.weight");
    CHECK(
        at::equal(theirs.at("model.encoder.layers.1.self_attn.q_proj.weight"), qkv.slice(0, 0, 8)));
    CHECK(at::equal(theirs.at("model.encoder.layers.1.self_attn.k_proj.weight"),
                    qkv.slice(0, 8, 16)));
    CHECK(at::equal(theirs.at("model.encoder.layers.1.self_attn.v_proj.bias"),
                    mine.at("encoder_layers.1.self_attn.qkv_proj.bias").slice(0, 16, 24)));
    CHECK(at::equal(theirs.at("model.decoder.layers.0.encoder_attn.v_proj.weight"),
                    mine.at("decoder_layers.0.cross_attn.kv_proj.weight").slice(0, 8, 16)));
    CHECK(at::equal(theirs.at("model.decoder.layers.0.final_layer_norm.weight"),
                    mine.at("decoder_layers.0.ffn_norm.weight")));
    if (config.model.output_bias) {
      CHECK(theirs.at("final_logits_bias").sizes() == at::IntArrayRef({1, config.tgt_vocab_size}));
    }
    if (config.model.norm == nmt::model::NormPosition::kPre) {
      CHECK(at::equal(theirs.at("model.encoder.layer_norm.bias"), mine.at("encoder_norm.bias")));
    }
    const NamedTensors back = nmt::hf::from_hf_tensors(hf, config, "hf");
    REQUIRE(back.size() == ours.size());
    for (size_t i = 0; i < ours.size(); ++i) {
      INFO(ours[i].first);
      CHECK(back[i].first == ours[i].first);
      CHECK(at::equal(back[i].second, ours[i].second));
    }
  }
}

TEST_CASE("tied tables are read from any of their transformers names", "[hf]") {
  const HfModelConfig config = parse(tiny_config("m2m_100"));
  NamedTensors hf = nmt::hf::to_hf_tensors(our_parameters(config), config);
  // save_pretrained may keep another of the tied names than model.shared.weight.
  for (auto& [name, tensor] : hf)
    if (name == "model.shared.weight") name = "model.decoder.embed_tokens.weight";
  hf.emplace_back("lm_head.weight", hf.front().second);
  hf.emplace_back("model.encoder.embed_positions.weights", at::zeros({34, 8}));  // not read
  const auto ours = by_name(nmt::hf::from_hf_tensors(hf, config, "hf"));
  CHECK(at::equal(ours.at("encoder_embed.tokens.weight"), hf.front().second));
}

TEST_CASE("a missing or an unexplained transformers tensor is refused, named", "[hf]") {
  const HfModelConfig config = parse(tiny_config("marian"));
  NamedTensors hf = nmt::hf::to_hf_tensors(our_parameters(config), config);
  NamedTensors extra = hf;
  extra.emplace_back("model.encoder.layernorm_embedding.weight", at::ones({8}));
  CHECK_THROWS_WITH(nmt::hf::from_hf_tensors(extra, config, "dir"),
                    Catch::Matchers::Contains("dir: 1 tensor(s)") &&
                        Catch::Matchers::Contains("model.encoder.layernorm_embedding.weight"));
  NamedTensors missing;
  for (const auto& entry : hf)
    if (entry.first != "model.shared.weight") missing.push_back(entry);
  CHECK_THROWS_WITH(nmt::hf::from_hf_tensors(missing, config, "dir"),
                    "dir: no tensor model.shared.weight (for encoder_embed.tokens.weight of a "
                    "marian model)");
}

TEST_CASE("a tensor of another shape than config.json implies is refused, naming both", "[hf]") {
  // Tensors of a d_model 8, ffn 16, vocabulary 20 model (tiny_config) read with a config.json
  // that says otherwise: the blocks agree with each other, so only the config can tell.
  const HfModelConfig config = parse(tiny_config("marian"));
  const NamedTensors hf = nmt::hf::to_hf_tensors(our_parameters(config), config);
  const auto refused = [&](const Json& extra, const std::string& message) {
    INFO(extra.dump());
    CHECK_THROWS_AS(
        nmt::hf::from_hf_tensors(hf, parse(tiny_config("marian", extra)), "dir"),
        nmt::CheckpointError);
    CHECK_THROWS_WITH(
        nmt::hf::from_hf_tensors(hf, parse(tiny_config("marian", extra)), "dir"),
        Catch::Matchers::Contains(message));
  };
  refused({{"d_model", 16}},
          "model.shared.weight has shape [20, 8], but config.json implies [20, 16]");
  refused({{"encoder_ffn_dim", 32}, {"decoder_ffn_dim", 32}},
          "model.encoder.layers.0.fc1.weight has shape [16, 8], but config.json implies [32, 8]");
  refused({{"vocab_size", kVocab + 1}, {"pad_token_id", 0}, {"decoder_start_token_id", 0}},
          "final_logits_bias has shape [1, 20], but config.json implies [1, 21]");
  // final_logits_bias alone of another length.
  NamedTensors bias = hf;
  REQUIRE(bias.front().first == "final_logits_bias");
  bias.front().second = at::zeros({1, kVocab + 1});
  CHECK_THROWS_WITH(
      nmt::hf::from_hf_tensors(bias, config, "dir"),
      Catch::Matchers::StartsWith(
          "dir: final_logits_bias has shape [1, 21], but config.json implies [1, 20]"));
}

TEST_CASE("a missing final_logits_bias reads as zeros, as transformers loads it", "[hf]") {
  const HfModelConfig config = parse(tiny_config("marian"));
  NamedTensors hf = nmt::hf::to_hf_tensors(our_parameters(config), config);
  REQUIRE(hf.front().first == "final_logits_bias");
  hf.erase(hf.begin());
  const auto ours = by_name(nmt::hf::from_hf_tensors(hf, config, "dir"));
  CHECK(at::equal(ours.at("output_bias"), at::zeros({kVocab})));
}

TEST_CASE("a model directory is read from config.json and model.safetensors", "[hf]") {
  nmt::test::TempDir dir;
  const Json json = tiny_config("marian", {{"activation_function", "swish"}});
  std::ofstream(dir.path() / "config.json") << json.dump();
  const HfModelConfig config = parse(json);
  const NamedTensors ours = our_parameters(config);
  nmt::checkpoint::CheckpointData file;
  file.tensors = nmt::hf::to_hf_tensors(ours, config);
  nmt::checkpoint::save_checkpoint(dir.path() / "model.safetensors", file);
  const nmt::hf::HfModel model = nmt::hf::read_hf_model(dir.path());
  CHECK(model.config.model.activation == nmt::model::Activation::kSilu);
  REQUIRE(model.tensors.size() == ours.size());
  for (size_t i = 0; i < ours.size(); ++i)
    CHECK(at::equal(model.tensors[i].second, ours[i].second));
}

TEST_CASE("a directory with only pytorch_model.bin is refused with how to write safetensors",
          "[hf]") {
  nmt::test::TempDir dir;
  std::ofstream(dir.path() / "config.json") << tiny_config("m2m_100").dump();
  std::ofstream(dir.path() / "pytorch_model.bin") << "pickle";
  CHECK_THROWS_WITH(nmt::hf::read_hf_model(dir.path()),
                    dir.path().string() +
                        ": only pytorch_model.bin, a pickle, which nmt-train does not load; write "
                        "safetensors with transformers: model.save_pretrained(dir, "
                        "safe_serialization=True)");
}
