#pragma once
// What translating and exporting take from a checkpoint besides the parameters' values: which
// group of weights (the moving average or the trained ones) and the stored SentencePiece
// vocabularies. One definition for nmt-translate (translator.cpp) and nmt-ckpt export-hf
// (hf/hf_export.cpp), so that an exported model is the one nmt-translate translates with.

#include <string>
#include <string_view>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/tensor_layout.h"
#include "data/vocab.h"
#include "decode/translate_options.h"

namespace nmt::decode {

/// The group of weights `choice` picks in `data`: kAuto the moving average (ema.*) when the
/// checkpoint has one, else the trained parameters (model.*). Throws CheckpointError naming
/// `name` (the file, for messages) for kEma on a checkpoint without a moving average.
checkpoint::TensorGroup weights_group(const checkpoint::CheckpointData& data, WeightsChoice choice,
                                      const std::string& name);

/// The SentencePiece model `file` (checkpoint::vocabulary_file) stored in `data`. Throws
/// CheckpointError naming `name` and the tensor when it is missing or not a model.
data::Vocab stored_vocabulary(const checkpoint::CheckpointData& data, std::string_view file,
                              const std::string& name);

}  // namespace nmt::decode
