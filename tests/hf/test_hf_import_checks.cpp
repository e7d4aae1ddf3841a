// hf/hf_import_checks: config.json's sizes against the run schema's bounds before anything is
// built from them, one error naming the file and key.
#include "catch_torch.h"  // first: see the header

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hf/hf_config.h"
#include "config/model_bounds.h"
#include "hf/hf_import_checks.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using Json = nlohmann::ordered_json;

namespace {

Json tiny_marian() {
  return {{"model_type", "marian"},
          {"d_model", 32},
          {"encoder_layers", 2},
          {"decoder_layers", 2},
          {"encoder_attention_heads", 4},
          {"decoder_attention_heads", 4},
          {"encoder_ffn_dim", 64},
          {"decoder_ffn_dim", 64},
          {"vocab_size", 300},
          {"pad_token_id", 299},
          {"decoder_start_token_id", 299},
          {"eos_token_id", 0},
          {"max_position_embeddings", 256},
          {"dropout", 0.1}};
}

void check_bounds(const Json& j) {
  nmt::hf::check_config_bounds(nmt::hf::parse_hf_config(j, "dir/config.json"), "dir");
}

}  // namespace

TEST_CASE("config.json sizes outside the schema's bounds are refused naming the key", "[hf]") {
  // Before: d_model 0 reached the tensor shapes, encoder_layers 2e9 built names until memory
  // ran out, dropout 1 and max_position_embeddings 4 imported into a config that never loads.
  struct Case {
    const char* key;
    Json value;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"d_model", 0, "dir/config.json: d_model = 0: expected an integer in [8, 65536]"},
      {"encoder_layers", 2000000000, "dir/config.json: encoder_layers = 2000000000: expected"},
      {"decoder_layers", 65, "dir/config.json: decoder_layers = 65: expected"},
      {"dropout", 1.0, "dir/config.json: dropout = 1: expected a number"},
      {"attention_dropout", -0.5, "dir/config.json: attention_dropout = -0.5: expected"},
      {"max_position_embeddings", 4, "dir/config.json: max_position_embeddings = 4: expected"},
      {"vocab_size", 3000000, "dir/config.json: vocab_size = 3000000: expected"},
  };
  CHECK_NOTHROW(check_bounds(tiny_marian()));
  for (const Case& c : cases) {
    INFO(c.key);
    Json j = tiny_marian();
    j[c.key] = c.value;
    if (std::string(c.key) == "vocab_size") j["decoder_vocab_size"] = c.value;
    CHECK_THROWS_AS(check_bounds(j), nmt::CheckpointError);
    CHECK_THROWS_WITH(check_bounds(j), Contains(c.message) && Contains("nmt-train's bounds"));
  }
  Json j = tiny_marian();
  j["share_encoder_decoder_embeddings"] = false;
  j["decoder_vocab_size"] = 2;
  j["pad_token_id"] = j["decoder_start_token_id"] = 1;
  CHECK_THROWS_WITH(check_bounds(j), Contains("decoder_vocab_size = 2: expected"));
}

TEST_CASE("the schema's model bounds name the key, the value and what is expected", "[hf]") {
  nmt::model::ModelOptions m;
  CHECK_FALSE(nmt::config::model_out_of_bounds(m).has_value());
  m.heads = 0;
  const auto bad = nmt::config::model_out_of_bounds(m);
  REQUIRE(bad.has_value());
  CHECK(bad->key == "model.heads");
  CHECK(bad->value == "0");
  CHECK_THAT(bad->expected, Contains("1") && Contains("1024"));
  CHECK(nmt::config::vocab_size_out_of_bounds(256206) == std::nullopt);
  CHECK(nmt::config::vocab_size_out_of_bounds(0).has_value());
}
