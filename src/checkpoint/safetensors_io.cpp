#include "checkpoint/safetensors_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <ATen/core/Tensor.h>

#include "checkpoint/checkpoint_file.h"
#include "util/error.h"

namespace nmt::checkpoint {
namespace {

/// A dtype checkpoints can hold, with its safetensors name.
struct DtypeInfo {
  c10::ScalarType type;
  std::string_view name;
};

constexpr DtypeInfo kDtypes[] = {
    {c10::ScalarType::Double, "F64"}, {c10::ScalarType::Float, "F32"},
    {c10::ScalarType::Half, "F16"},   {c10::ScalarType::BFloat16, "BF16"},
    {c10::ScalarType::Long, "I64"},   {c10::ScalarType::Int, "I32"},
    {c10::ScalarType::Short, "I16"},  {c10::ScalarType::Char, "I8"},
    {c10::ScalarType::Byte, "U8"},    {c10::ScalarType::Bool, "BOOL"},
};

}  // namespace

std::optional<c10::ScalarType> dtype_from_name(std::string_view name) {
  for (const DtypeInfo& info : kDtypes) {
    if (info.name == name) return info.type;
  }
  return std::nullopt;
}

std::string_view dtype_name(c10::ScalarType type) {
  for (const DtypeInfo& info : kDtypes) {
    if (info.type == type) return info.name;
  }
  return c10::toString(type);
}

void hash_header(XxHash64& hash, std::string_view format,
                 const std::map<std::string, std::string>& metadata,
                 const std::vector<TensorEntry>& tensors) {
  const auto text = [&](std::string_view s) {
    hash.update(s.data(), s.size());
    hash.update("", 1);
  };
  const auto number = [&](int64_t v) { hash.update(&v, sizeof(v)); };
  text(format);
  for (const auto& [key, value] : metadata) {
    text(key);
    text(value);
  }
  for (const TensorEntry& t : tensors) {
    text(t.name);
    number(static_cast<int64_t>(t.type));
    number(static_cast<int64_t>(t.shape.size()));
    for (int64_t d : t.shape) number(d);
    number(static_cast<int64_t>(t.begin));
    number(static_cast<int64_t>(t.end));
  }
}

void read_at(int fd, const std::filesystem::path& file, void* out, size_t size, uint64_t offset) {
  auto* p = static_cast<char*>(out);
  while (size > 0) {
    const ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      NMT_THROW(CheckpointError, "{}: cannot read: {}", file.string(), std::strerror(errno));
    }
    NMT_CHECK(n > 0, CheckpointError, "{}: truncated: the file ended at byte {} while reading",
              file.string(), offset);
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

int open_for_reading(const std::filesystem::path& file) {
  // Non-blocking, so that a FIFO is refused here rather than waited on (an open for reading
  // blocks until a writer comes); a regular file reads the same either way.
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    NMT_THROW(CheckpointError, "{}: cannot open: {}", file.string(), std::strerror(errno));
  }
  FdCloser closer(fd);
  struct stat info {};
  NMT_CHECK(::fstat(fd, &info) == 0, CheckpointError, "{}: cannot stat: {}", file.string(),
            std::strerror(errno));
  NMT_CHECK(S_ISREG(info.st_mode), CheckpointError,
            "{}: not a regular file ({}): refused rather than read", file.string(),
            S_ISFIFO(info.st_mode)  ? "a FIFO"
            : S_ISDIR(info.st_mode) ? "a directory"
                                    : "a device or socket");
  const int flags = ::fcntl(fd, F_GETFL);
  NMT_CHECK(flags >= 0 && ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0, CheckpointError,
            "{}: cannot make blocking: {}", file.string(), std::strerror(errno));
  return closer.release();
}

std::string_view safetensors_dtype_name(const at::Tensor& tensor) {
  for (const DtypeInfo& info : kDtypes) {
    if (info.type == tensor.scalar_type()) return info.name;
  }
  NMT_THROW(CheckpointError, "dtype {} cannot be stored in a checkpoint (supported: {})",
            c10::toString(tensor.scalar_type()), kSupportedDtypes);
}

}  // namespace nmt::checkpoint
