#pragma once
// Reading a safetensors header (checkpoint_file.cpp's loaders): the length, the JSON, the
// metadata, each tensor's entry, and that the entries tile the data section of a file of
// exactly that size. Internal to checkpoint/.

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/safetensors_io.h"

namespace nmt::checkpoint {

/// The header's key of the metadata object (every other key names a tensor).
inline constexpr std::string_view kMetadataKey = "__metadata__";

/// A parsed and checked header.
struct Header {
  std::map<std::string, std::string> metadata;  ///< without the nmt.* keys
  std::string format;                           ///< nmt.format
  std::string checksum;                         ///< nmt.checksum
  std::vector<TensorEntry> tensors;             ///< in header order
  uint64_t data_start = 0;                      ///< file offset of the data section
};

/// Which safetensors files a reader accepts.
enum class HeaderKind {
  kCheckpoint,  ///< ours: nmt.format and nmt.checksum required
  kAny,         ///< any safetensors file (e.g. transformers' model.safetensors)
};

/// Reads and checks everything but the tensor bytes: header length, JSON, nmt.format (for a
/// checkpoint), entries, that the offsets tile the data section and that the file has exactly
/// that many bytes. Throws CheckpointError "<file>: <what is wrong>".
Header read_header(int fd, const std::filesystem::path& file, HeaderKind kind);

}  // namespace nmt::checkpoint
