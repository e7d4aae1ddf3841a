#pragma once
// What nmt-ckpt does with checkpoints: summarize one (info), compare two (diff) and average
// several (average). The model's parameters are the model group of tensor_layout.h ("model.*");
// the rest of the training state (optimizer moments, scaler, RNG, ...) is in other groups.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/tensor_layout.h"

namespace nmt::checkpoint {

/// Elements over all model.* tensors.
int64_t model_parameter_count(const CheckpointData& data);

/// XXH64 over the model.* tensors in name order; for each: its name, a NUL byte, its dtype
/// name, its rank and dims (int64 little-endian), then its bytes. Equal hashes mean the same
/// parameters, whatever else the checkpoints hold.
uint64_t model_parameter_hash(const CheckpointData& data);

/// `nmt-ckpt info`: a JSON object with path, step, epoch, config_hash (from metadata; null
/// when absent), parameters, parameter_hash, tensors, bytes and all metadata.
std::string checkpoint_info_json(const std::filesystem::path& file);

/// What `nmt-ckpt diff` compares and how strictly.
struct DiffOptions {
  double atol = 0;           ///< largest absolute difference still counted as equal
  bool all_tensors = false;  ///< compare every tensor, not only model.*
};

/// Result of diff_checkpoints.
struct DiffReport {
  bool same = false;  ///< same names, dtypes and shapes, and every difference <= atol
  std::string json;   ///< "tensors" (max abs difference of each), "max_abs_diff", "mismatches"
};

/// Compares the (model.*) tensors of two checkpoints element-wise, in float64.
DiffReport diff_checkpoints(const std::filesystem::path& a, const std::filesystem::path& b,
                            const DiffOptions& options);

/// Element-wise mean of the tensors of `group` (the model's, or e.g. the moving average's) of
/// inputs, under their checkpoint names (in float64, cast back to each tensor's
/// dtype; integer and bool tensors must be equal in all inputs). Metadata is the last input's
/// plus "averaged_from" (the inputs, comma-separated); other tensors are dropped. Throws
/// CheckpointError naming the tensor and file on mismatched names, dtypes or shapes.
CheckpointData average_checkpoints(const std::vector<std::filesystem::path>& inputs,
                                   TensorGroup group = TensorGroup::kModel);

}  // namespace nmt::checkpoint
