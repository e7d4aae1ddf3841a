#pragma once
// The model a Translator translates with, loaded from checkpoints: for -c (a checkpoint file,
// or a run directory, whose newest checkpoints --average K averages), the parameters of the
// chosen group (moving average or trained, --weights) on the device, and the vocabularies,
// special ids and language prefixes the checkpoint stores. Internal to decode/.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "data/vocab.h"
#include "decode/search.h"
#include "decode/translate_options.h"
#include "decode/translator.h"
#include "model/transformer.h"

namespace nmt::decode {

/// The model of a Translator, loaded.
struct LoadedModel {
  std::vector<std::filesystem::path> files;  ///< its checkpoint file(s), oldest first
  std::string name;                          ///< the newest file, for messages
  data::Vocab src_vocab;                     ///< the source SentencePiece model
  data::Vocab tgt_vocab;                     ///< src_vocab again when joint
  model::Transformer model{nullptr};         ///< in eval mode, on the device
  SearchIds ids;                             ///< its special ids and forced target prefix
  std::vector<int32_t> prefix;  ///< ids first in every source (--tgt-lang's tag, --src-lang's code)
};

/// Throws ConfigError for options out of range (search, max_tokens, average).
void check_translate_options(const TranslateOptions& options);

/// Where the model runs: DeviceError for kCuda without a visible GPU.
at::Device pick_device(DeviceChoice choice, int64_t cuda_index);

/// Loads the model of options.checkpoint onto `device`. Throws CheckpointError for a missing or
/// bad checkpoint.
LoadedModel load_model(const TranslateOptions& options, const at::Device& device,
                       const ModelConfigReader& read_config);

}  // namespace nmt::decode
