#pragma once
// Putting a group's tensors into a checkpoint and taking them out, by names within the group
// (the layout is tensor_layout.h), and the bytes that some groups hold (the vocabulary's
// SentencePiece files, the random generator states) as uint8 tensors.

#include <filesystem>
#include <string>
#include <string_view>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/tensor_layout.h"

namespace nmt::checkpoint {

/// Appends `tensors` (named within `group`) to `data` under their checkpoint names.
void add_tensors(CheckpointData& data, TensorGroup group, NamedTensors tensors);

/// Appends one tensor named `name` within `group` to `data`.
void add_tensor(CheckpointData& data, TensorGroup group, std::string_view name, at::Tensor tensor);

/// The tensors of `group` in `data`, in file order, named within the group.
NamedTensors group_tensors(const CheckpointData& data, TensorGroup group);

/// Whether `data` has any tensor of `group`.
bool has_group(const CheckpointData& data, TensorGroup group);

/// The tensor called `name` within `group`, or nullptr when there is none.
const at::Tensor* find_tensor(const CheckpointData& data, TensorGroup group, std::string_view name);

/// The tensor called `name` within `group`; throws CheckpointError naming the file and the
/// tensor's checkpoint name when there is none.
const at::Tensor& tensor_at(const CheckpointData& data, TensorGroup group, std::string_view name);

/// A finder over `group` of `data` (which must outlive it), for a component's load_state.
TensorFinder group_finder(const CheckpointData& data, TensorGroup group);

/// The layout as JSON (what `nmt-ckpt layout` prints, and what scripts/export-ctranslate2.py's
/// LAYOUT table is checked against): groups (name, prefix, contents), the attention
/// projections' module names, optimizer_slots, scaler_fields, vocabulary_files and the
/// pattern of the rng names.
std::string tensor_layout_json();

/// A uint8 tensor (CPU) holding `bytes`.
at::Tensor bytes_tensor(std::string_view bytes);

/// The bytes a uint8 tensor holds (any device; other dtypes are converted to uint8).
std::string tensor_bytes(const at::Tensor& tensor);

/// A uint8 tensor holding the file's contents; throws CheckpointError when it cannot be read.
at::Tensor file_bytes_tensor(const std::filesystem::path& file);

}  // namespace nmt::checkpoint
