#include "hf/hf_import_checks.h"

#include <string_view>
#include <utility>

#include "config/model_bounds.h"
#include "util/error.h"
#include "util/log.h"

namespace nmt::hf {
namespace {

/// The config.json key each bounded model.* key is read from (hf/hf_config.cpp).
constexpr std::pair<std::string_view, const char*> kConfigKeys[] = {
    {"model.encoder_layers", "encoder_layers"},
    {"model.decoder_layers", "decoder_layers"},
    {"model.d_model", "d_model"},
    {"model.heads", "encoder_attention_heads"},
    {"model.ffn_dim", "encoder_ffn_dim"},
    {"model.dropout", "dropout"},
    {"model.attention_dropout", "attention_dropout"},
    {"model.activation_dropout", "activation_dropout"},
    {"model.max_positions", "max_position_embeddings"},
};

std::string_view config_key(std::string_view model_key) {
  for (const auto& [ours, theirs] : kConfigKeys)
    if (ours == model_key) return theirs;
  return model_key;
}

}  // namespace

void check_config_bounds(const HfModelConfig& config,
                         const std::filesystem::path& dir) {
  const std::string file = (dir / "config.json").string();
  if (const auto bad = config::model_out_of_bounds(config.model)) {
    NMT_THROW(CheckpointError, "{}: {} = {}: expected {} (nmt-train's bounds for {})", file,
              config_key(bad->key), bad->value, bad->expected, bad->key);
  }
  const bool marian = config.type == HfModelType::kMarian;
  const std::pair<const char*, int64_t> sizes[] = {
      {"vocab_size", config.src_vocab_size},
      {marian ? "decoder_vocab_size" : "vocab_size", config.tgt_vocab_size}};
  for (const auto& [key, size] : sizes) {
    if (const auto expected = config::vocab_size_out_of_bounds(size)) {
      NMT_THROW(CheckpointError,
                "{}: {} = {}: expected {} (nmt-train's bounds for data.vocab_size)", file, key,
                size, *expected);
    }
  }
}

void check_ids(const HfModelConfig& config, const data::Vocabularies& vocab,
               const std::filesystem::path& dir) {
  // config.json and the tokenizer must agree on the ids the model was trained with: a
  // directory whose files come from two models would otherwise import and translate badly.
  const std::string file = (dir / "config.json").string();
  const auto check = [&](const char* key, int64_t model_id, int64_t tokenizer_id,
                         const char* token) {
    NMT_CHECK(model_id == tokenizer_id, CheckpointError,
              "{}: {} is {}, but the tokenizer in {} has {} at id {}: the config and the "
              "tokenizer files are not of one model",
              file, key, model_id, dir.string(), token, tokenizer_id);
  };
  check("pad_token_id", config.pad_id, vocab.src.pad_id(), "its pad token");
  // Marian's separate target vocabulary may put <pad> elsewhere (OPUS-MT's converter appends
  // it to each vocabulary): transformers then starts and pads the decoder with the source's
  // pad id, whatever target token that is, where our model has one pad id for both sides and
  // starts with the target's pad.
  NMT_CHECK(vocab.joint || vocab.tgt.pad_id() == config.pad_id, CheckpointError,
            "{}: pad_token_id is {}, but {} has <pad> at id {}: nmt-train has one pad id for both "
            "vocabularies (the decoder starts with it), so this model's decoder would start with "
            "another token than in transformers; not supported",
            file, config.pad_id, (dir / "target_vocab.json").string(), vocab.tgt.pad_id());
  check("pad_token_id", config.pad_id, vocab.tgt.pad_id(), "its target pad token");
  check("eos_token_id", config.eos_id, vocab.tgt.eos_id(), "its eos token");
  const int64_t start = model::decoder_start_id(config.model.decoder_start, vocab.tgt.bos_id(),
                                                vocab.tgt.eos_id(), vocab.tgt.pad_id());
  check("decoder_start_token_id", config.decoder_start_id, start, "the decoder start token");
  const auto check_size = [&](const char* key, int64_t rows, const data::Vocab& side,
                              const char* what) {
    NMT_CHECK(rows == side.size(), CheckpointError,
              "{}: {} is {}, but the tokenizer in {} has {} {} ids", file, key, rows, dir.string(),
              side.size(), what);
  };
  check_size("vocab_size", config.src_vocab_size, vocab.src, "source");
  check_size(config.type == HfModelType::kMarian ? "decoder_vocab_size" : "vocab_size",
             config.tgt_vocab_size, vocab.tgt, "target");
}

void warn_unreproduced(const HfModelConfig& config, const std::filesystem::path& dir) {
  const std::string file = (dir / "config.json").string();
  const std::pair<const char*, double> drops[] = {{"encoder_layerdrop", config.encoder_layerdrop},
                                                  {"decoder_layerdrop", config.decoder_layerdrop}};
  for (const auto& [key, rate] : drops) {
    if (rate > 0) {
      log::warn("ckpt",
                "{}: {} = {} is ignored: fine-tuning here never skips a layer (transformers "
                "skips each with that probability in training); translation is unaffected",
                file, key, rate);
    }
  }
}

}  // namespace nmt::hf
