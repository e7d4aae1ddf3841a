#pragma once
// What translating and exporting take from a checkpoint besides the parameters' values: which
// group of weights (the moving average or the trained ones) and the stored SentencePiece
// vocabularies. One definition for nmt-translate (translator.cpp) and nmt-ckpt export-hf
// (hf/hf_export.cpp), so that an exported model is the one nmt-translate translates with.

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/tensor_layout.h"
#include "data/vocab.h"
#include "decode/translate_options.h"

namespace nmt::decode {

/// The group of weights `choice` picks in a checkpoint whose tensors are `tensor_names` (their
/// checkpoint names, as read_checkpoint_tensor_names gives them): kAuto the moving average
/// (ema.*) when the checkpoint has one, else the trained parameters (model.*). Throws
/// CheckpointError naming `name` (the file, for messages) for kEma on a checkpoint without a
/// moving average.
checkpoint::TensorGroup weights_group(const std::vector<std::string>& tensor_names,
                                      WeightsChoice choice, const std::string& name);

/// What translating and exporting read of a checkpoint file: its metadata, its vocabulary
/// files and the weights of `group`.
struct StoredWeights {
  checkpoint::CheckpointData data;  ///< those tensors, views of the file mapped
  checkpoint::TensorGroup group = checkpoint::TensorGroup::kModel;  ///< weights_group's choice
};

/// Loads of `file` what StoredWeights holds, `choice` picking the weights as weights_group
/// does (from the header's tensor names, before any tensor is read). The other group of
/// weights and the optimizer's state (twice the parameters: a checkpoint written while
/// training is three to four times its weights) are read and hashed, for the checksum covers
/// every byte, but never held; the tensors kept are views of the file mapped
/// (checkpoint::map_checkpoint), so the process's own memory holds the weights once, in the
/// model they are copied into. Throws CheckpointError naming the file.
StoredWeights load_stored_weights(const std::filesystem::path& file, WeightsChoice choice);

/// The SentencePiece model `file` (checkpoint::vocabulary_file) stored in `data`. Throws
/// CheckpointError naming `name` and the tensor when it is missing or not a model.
data::Vocab stored_vocabulary(const checkpoint::CheckpointData& data, std::string_view file,
                              const std::string& name);

}  // namespace nmt::decode
