#pragma once
// What import-hf checks before it reads the weights (a refusal after reading 13 GB wastes
// minutes), each failure one CheckpointError naming dir/config.json and its key:
//   - config.json's sizes and rates within the bounds the run schema sets on the model section
//     and on data.vocab_size (config/model_bounds.h), before any name or tensor is built from
//     them (encoder_layers: 2000000000 would build names for ever);
//   - config.json's special ids and vocabulary sizes against the tokenizer's.
// And what it imports but does not reproduce, said once as a warning (encoder_layerdrop and
// decoder_layerdrop: fine-tuning here never drops a layer).

#include <filesystem>

#include "hf/hf_config.h"
#include "data/vocab.h"

namespace nmt::hf {

/// Throws CheckpointError for the first value of `config` outside nmt-train's bounds.
void check_config_bounds(const HfModelConfig& config, const std::filesystem::path& dir);

/// Throws CheckpointError when config.json's ids or sizes and the tokenizer's disagree.
void check_ids(const HfModelConfig& config, const data::Vocabularies& vocab,
               const std::filesystem::path& dir);

/// Logs a warning for each setting of config.json that is read but not reproduced.
void warn_unreproduced(const HfModelConfig& config, const std::filesystem::path& dir);

}  // namespace nmt::hf
