#pragma once
// The safetensors files of a transformers model directory, read as one state dict:
// model.safetensors, or the shards that model.safetensors.index.json maps each tensor to
// (save_pretrained above max_shard_size: {"weight_map": {tensor: shard file}}). The map and the
// shards must agree exactly: every tensor comes from the shard the map names for it, every
// mapped tensor is there, and no tensor is in two shards; a directory whose files were mixed
// from two downloads would otherwise import whichever copy came last. A file that is not a
// regular file (a FIFO) is refused before it is opened. pytorch_model.bin (a pickle) is never
// loaded: a directory with only that is refused with how to write safetensors.

#include <filesystem>

#include "checkpoint/tensor_layout.h"

namespace nmt::hf {

inline constexpr const char* kHfWeightsFile = "model.safetensors";              ///< one file
inline constexpr const char* kHfWeightsIndex = "model.safetensors.index.json";  ///< the shards'

/// Every tensor of dir's weights, by transformers name (dtypes as stored). Throws
/// CheckpointError naming the file (and the tensor or key) of what is wrong.
checkpoint::NamedTensors read_hf_weight_files(const std::filesystem::path& dir);

}  // namespace nmt::hf
