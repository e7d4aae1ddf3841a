#pragma once
// Which transformers tokenizer class a model directory holds, decided as AutoTokenizer decides
// it (transformers 5.x): tokenizer_config.json's tokenizer_class; without it, config.json's
// tokenizer_class; without either, the class of config.json's model_type (marian:
// MarianTokenizer, m2m_100: M2M100Tokenizer). OPUS-MT repositories converted before
// tokenizer_class was written carry only {"source_lang", "target_lang"} and load as Marian.
// A class found from model_type is checked for the files it reads, so that a directory the
// Python class cannot load either (an NLLB directory that names no class reads as M2M100 and
// has no vocab.json) is refused naming the file and how the class was chosen.

#include <filesystem>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "data/token_table.h"

namespace nmt::hf {

/// What the model's config.json says about its tokenizer (import-hf reads it first).
struct HfTokenizerModel {
  /// config.json's model_type ("marian", "m2m_100"): the class when no file names one; empty
  /// when unknown (then tokenizer_config.json must name it).
  std::string model_type;
  /// config.json's tokenizer_class; empty when it has none.
  std::string tokenizer_class;
  int64_t src_rows = 0;  ///< rows of the encoder's token table; 0: the tokenizer's ids
  int64_t tgt_rows = 0;  ///< rows of the decoder's token table; 0: the tokenizer's ids
};

/// The class AutoTokenizer would load `dir` with, given its parsed tokenizer_config.json
/// (`config`, an empty object when the file is absent; `config_file` names it). Throws
/// DataError naming the file and key when the class is not one we read, when nothing names
/// one, or when a class chosen by model_type lacks a file it reads.
data::HfTokenizerKind hf_tokenizer_class(const nlohmann::json& config, const HfTokenizerModel& model,
                                   const std::filesystem::path& dir,
                                   const std::filesystem::path& config_file);

}  // namespace nmt::hf
