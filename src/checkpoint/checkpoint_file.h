#pragma once
// One checkpoint file: named tensors and string metadata in the safetensors format
// (https://github.com/huggingface/safetensors): an 8-byte little-endian header length N, N
// bytes of JSON header, then the tensors' raw bytes. It is data only (loading never runs
// code, unlike a pickle) and Python reads it with safetensors.torch.load_file / safe_open.
//
// nmt-train adds two metadata keys: nmt.format ("nmt-checkpoint-2") and nmt.checksum (XXH64, 16
// hex digits, of the data section followed by the header's content: format, every other
// metadata key and value, and each tensor's name, dtype, shape and offsets), written by
// save_checkpoint and checked by load_checkpoint; they describe the file, so CheckpointData
// never holds them. Format 1 files, whose checksum covers the data section only, still load.

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "checkpoint/tensor_layout.h"

namespace nmt::checkpoint {

/// Value of the nmt.format metadata key this build writes and reads.
inline constexpr std::string_view kFormatVersion = "nmt-checkpoint-2";
/// The first format: its checksum covers the data section only (a flipped byte in the
/// metadata went unnoticed). Read, never written.
inline constexpr std::string_view kFormatVersion1 = "nmt-checkpoint-1";
/// Metadata key of the format version (reserved: written by save_checkpoint).
inline constexpr std::string_view kFormatKey = "nmt.format";
/// Metadata key of the data checksum (reserved: written by save_checkpoint).
inline constexpr std::string_view kChecksumKey = "nmt.checksum";

/// A checkpoint's contents: named tensors (CPU) and string metadata.
struct CheckpointData {
  NamedTensors tensors;                         ///< checkpoint names (tensor_layout.h), in order
  std::map<std::string, std::string> metadata;  ///< free-form strings
  std::filesystem::path source;  ///< file it was loaded from, for messages (empty if built)

  /// The tensor called name, or nullptr when there is none.
  const at::Tensor* find(std::string_view name) const;
  /// The tensor called name; throws CheckpointError naming it when there is none.
  const at::Tensor& at(std::string_view name) const;
  /// The metadata value of key; throws CheckpointError naming it when there is none.
  const std::string& meta(std::string_view key) const;
};

/// Writes data to file atomically (temp file, fsync, rename, fsync of the folder; see
/// util/atomic_file.h): on any failure it throws CheckpointError and an existing file is
/// unchanged.
/// Tensors may live on any device and have any strides; they are written C-contiguous.
/// Dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL. The folder must exist.
void save_checkpoint(const std::filesystem::path& file, const CheckpointData& data);

/// Reads and verifies a checkpoint (header, offsets, sizes, checksum); tensors are on the CPU.
/// Separate attention projections of an older checkpoint come back fused (legacy_attention.h).
/// Every problem is a CheckpointError "<file>: <what is wrong>".
CheckpointData load_checkpoint(const std::filesystem::path& file);

/// Which tensors a partial load keeps, by checkpoint name.
using TensorFilter = std::function<bool(std::string_view name)>;

/// load_checkpoint keeping only the tensors `keep` accepts: every byte is still read and the
/// checksum checked, but the others are never held (fine-tuning takes the model group of a
/// checkpoint whose optimizer state is twice as large).
CheckpointData load_checkpoint(const std::filesystem::path& file, const TensorFilter& keep);

/// load_checkpoint (the same checks, the checksum too) whose kept tensors are views of the
/// file mapped copy-on-write instead of copies: the ranks of a node that load one checkpoint
/// (train.init_from, a resume) share its pages in the page cache, one copy in memory read from
/// disk once, and a rank's own memory holds only the pages it writes to. A tensor whose data
/// is not aligned for its dtype, and an old checkpoint's fused attention, are copies. The file
/// must not be cut short while its tensors live (checkpoints are replaced by renames, never
/// rewritten in place).
CheckpointData map_checkpoint(const std::filesystem::path& file,
                              const TensorFilter& keep = nullptr);

/// The header's metadata and the tensors `keep` accepts, and no other byte of the file: for a
/// few small tensors of a large checkpoint (fine-tuning's vocabulary from a 13 GB model). The
/// header is checked as by load_checkpoint, but not the checksum, which covers every byte; no
/// legacy fusing. Throws CheckpointError "<file>: <what is wrong>".
CheckpointData read_checkpoint_tensors(const std::filesystem::path& file, const TensorFilter& keep);

/// Reads any safetensors file (transformers' model.safetensors): the same checks of header,
/// offsets and sizes as load_checkpoint, but no nmt.format, no checksum and no legacy fusing;
/// its metadata comes back whole. Throws CheckpointError "<file>: <what is wrong>".
CheckpointData load_safetensors(const std::filesystem::path& file);

/// load_safetensors (the same checks) whose tensors are views of the file mapped copy-on-write,
/// as map_checkpoint's: nmt-ckpt import-hf holds no copy of the model's weights of its own (a
/// tensor whose data is not aligned for its dtype is a copy). The file must not be cut short
/// while its tensors live.
CheckpointData map_safetensors(const std::filesystem::path& file);

/// Reads only the header's metadata (no tensor data, no checksum): cheap, for choosing among
/// checkpoints. Throws CheckpointError like load_checkpoint for a bad header.
std::map<std::string, std::string> read_checkpoint_metadata(const std::filesystem::path& file);

/// The names of the tensors the header lists, in header order, and no other byte of the file
/// (no tensor data, no checksum): for choosing which tensors to load before reading a large
/// checkpoint. An older checkpoint's attention projections are named as stored, unfused.
/// Throws CheckpointError like load_checkpoint for a bad header.
std::vector<std::string> read_checkpoint_tensor_names(const std::filesystem::path& file);

/// The safetensors dtype name of a tensor's dtype ("F32", ...); throws CheckpointError for a
/// dtype checkpoints cannot hold.
std::string_view safetensors_dtype_name(const at::Tensor& tensor);

}  // namespace nmt::checkpoint
