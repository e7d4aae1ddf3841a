#pragma once
// The config.json of a transformers model directory (as save_pretrained writes it) of
// model_type "marian" (MarianMT, OPUS-MT) or "m2m_100" (M2M100, NLLB-200), read as our
// ModelOptions with the conventions of transformers 5.x:
//
//   marian: post-norm, positions kMarian, final_logits_bias -> output_bias, decoder start pad
//   m2m_100: pre-norm with a final LayerNorm per stack, positions kM2m100, decoder start eos
//
// A value whose computation we do not reproduce exactly (another activation, an embedding
// LayerNorm, a norm placement the type does not have, untied embeddings we cannot express,
// ...) is refused with one CheckpointError naming the file, the key and its value. Keys that
// only shape training in transformers (init_std) or generation are ignored; encoder_layerdrop
// and decoder_layerdrop are read for import-hf to warn about (fine-tuning drops no layers).

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "model/model_options.h"

namespace nmt::hf {

/// The transformers architectures we import.
enum class HfModelType { kMarian, kM2m100 };

/// The model_type value of a type ("marian", "m2m_100").
std::string_view hf_model_type_name(HfModelType type);

/// What a config.json says, in our terms.
struct HfModelConfig {
  HfModelType type = HfModelType::kMarian;  ///< model_type
  model::ModelOptions model;     ///< the architecture; dropout rates as the config gives them
  int64_t src_vocab_size = 0;    ///< rows of the encoder's token table (vocab_size)
  int64_t tgt_vocab_size = 0;    ///< rows of the decoder's (Marian: decoder_vocab_size)
  int64_t pad_id = 0;            ///< pad_token_id: the embeddings' padding row
  int64_t eos_id = 0;            ///< eos_token_id
  int64_t bos_id = -1;           ///< bos_token_id; -1 when the config has none
  int64_t decoder_start_id = 0;  ///< decoder_start_token_id (model.decoder_start names its role)
  /// tokenizer_class: AutoTokenizer's choice where tokenizer_config.json names none; "" if absent.
  std::string tokenizer_class;
  double encoder_layerdrop = 0.0;  ///< encoder_layerdrop: training-only, not reproduced
  double decoder_layerdrop = 0.0;  ///< decoder_layerdrop: training-only, not reproduced
};

/// Reads a parsed config.json; `origin` names it in errors. Throws CheckpointError.
HfModelConfig parse_hf_config(const nlohmann::ordered_json& config, const std::string& origin);

/// Reads dir/config.json (refused unread when it is not a regular file, e.g. a FIFO). Throws
/// CheckpointError naming the file.
HfModelConfig read_hf_config(const std::filesystem::path& dir);

}  // namespace nmt::hf
