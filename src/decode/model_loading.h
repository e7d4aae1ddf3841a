#pragma once
// The models a Translator translates with, loaded from checkpoints: for each -c (a checkpoint
// file, or a run directory, whose newest checkpoints --average K averages), the parameters of
// the chosen group (moving average or trained, --weights) on the device, and the vocabularies,
// special ids and language prefixes the checkpoint stores. The models of an ensemble must
// translate alike: one vocabulary (the SentencePiece models stored in the checkpoints,
// compared by content), one decoder start, the same language prefixes. Internal to decode/.

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

/// One model of a Translator, loaded.
struct LoadedModel {
  std::vector<std::filesystem::path> files;  ///< its checkpoint file(s), oldest first
  std::string name;                          ///< the newest file, for messages
  data::Vocab src_vocab;                     ///< the source SentencePiece model
  data::Vocab tgt_vocab;                     ///< src_vocab again when joint
  model::Transformer model{nullptr};         ///< in eval mode, on the device
  SearchIds ids;                             ///< its special ids and forced target prefix
  std::vector<int32_t> prefix;  ///< ids first in every source (--tgt-lang's tag, --src-lang's code)
  double load_seconds = 0;      ///< reading its checkpoint(s), building and packing the model
};

/// Throws ConfigError for options out of range (search, max_tokens, average, no checkpoint, a
/// count of ensemble weights other than the checkpoints', a weight that is not finite and > 0).
void check_translate_options(const TranslateOptions& options);

/// Where the models run: DeviceError for kCuda without a visible GPU.
at::Device pick_device(DeviceChoice choice, int64_t cuda_index);

/// Loads every model of options.checkpoints onto `device`, in order, each checked against the
/// first as soon as it is loaded (ConfigError naming both checkpoints when it cannot join it
/// in an ensemble). Throws CheckpointError for a missing or bad checkpoint.
std::vector<LoadedModel> load_models(const TranslateOptions& options, const at::Device& device,
                                     const ModelConfigReader& read_config);

}  // namespace nmt::decode
