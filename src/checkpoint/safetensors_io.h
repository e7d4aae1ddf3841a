#pragma once
// The parts of the safetensors format that reading and writing checkpoints share
// (checkpoint_file.cpp): the dtypes and their names, a tensor's header entry, the checksum
// over the header's content, and positioned reads. Internal to checkpoint/.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <c10/core/ScalarType.h>

#include "checkpoint/xxhash64.h"

namespace nmt::checkpoint {

/// The safetensors dtypes a checkpoint can hold, for messages.
inline constexpr const char* kSupportedDtypes = "F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL";

/// The dtype of a safetensors dtype name ("F32"), nullopt for names we do not support.
std::optional<c10::ScalarType> dtype_from_name(std::string_view name);

/// The safetensors name of a supported dtype, else torch's name for it.
std::string_view dtype_name(c10::ScalarType type);

/// One tensor as the header describes it.
struct TensorEntry {
  std::string name;
  c10::ScalarType type = c10::ScalarType::Float;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  ///< offset in the data section
  uint64_t end = 0;
};

/// Adds the header's content to a checksum that has hashed the data section: the format, every
/// metadata key and value but the checksum itself (in key order), then each tensor's name,
/// dtype, shape and offsets (in header order). Strings end with a 0 byte, so that no two
/// headers hash the same sequence of bytes.
void hash_header(XxHash64& hash, std::string_view format,
                 const std::map<std::string, std::string>& metadata,
                 const std::vector<TensorEntry>& tensors);

/// Closes a file descriptor on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  /// Hands the descriptor over: it is no longer closed here.
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

/// Reads exactly size bytes at offset; throws CheckpointError naming file when the file ends
/// early or a read fails.
void read_at(int fd, const std::filesystem::path& file, void* out, size_t size, uint64_t offset);

/// Opens file for reading; throws CheckpointError naming it when it cannot.
int open_for_reading(const std::filesystem::path& file);

}  // namespace nmt::checkpoint
