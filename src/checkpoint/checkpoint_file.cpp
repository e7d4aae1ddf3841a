#include "checkpoint/checkpoint_file.h"
#include "checkpoint/legacy_attention.h"

#include "util/utf8.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <fmt/format.h>

#include "checkpoint/safetensors_header.h"
#include "checkpoint/safetensors_io.h"
#include "checkpoint/xxhash64.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_text.h"

namespace nmt::checkpoint {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors is little-endian and tensors are written from memory as they are");

// Reads of a large tensor go in pieces so that each is hashed while still in the cache.
constexpr size_t kReadChunkBytes = 64 << 20;

/// A tensor ready to be written: on the CPU, C-contiguous, with its place in the data section.
struct PreparedTensor {
  const std::string* name = nullptr;
  at::Tensor cpu;
  std::string_view dtype;
  uint64_t begin = 0;
  uint64_t end = 0;
};

/// Checks the caller's metadata: no reserved nmt.* key, valid UTF-8 keys and values.
void check_metadata(const CheckpointData& data, const std::string& path) {
  for (const auto& [key, value] : data.metadata) {
    NMT_CHECK(key != kFormatKey && key != kChecksumKey, CheckpointError,
              "{}: metadata key {} is reserved (save_checkpoint writes it)", path, key);
    NMT_CHECK(find_invalid_utf8(key) == std::string_view::npos &&
                  find_invalid_utf8(value) == std::string_view::npos,
              CheckpointError, "{}: metadata {}: key and value must be valid UTF-8", path,
              json::quote(key));
  }
}

/// Checks every tensor (a valid unique name, defined, dense, a supported dtype) and makes it
/// ready to write: on the CPU, C-contiguous.
std::vector<PreparedTensor> prepare_tensors(const CheckpointData& data, const std::string& path) {
  std::vector<PreparedTensor> prepared;
  prepared.reserve(data.tensors.size());
  std::set<std::string_view> names;
  for (const auto& [name, tensor] : data.tensors) {
    NMT_CHECK(!name.empty() && name != kMetadataKey, CheckpointError, "{}: invalid tensor name {}",
              path, json::quote(name));
    NMT_CHECK(find_invalid_utf8(name) == std::string_view::npos, CheckpointError,
              "{}: tensor name {} is not valid UTF-8", path, json::quote(name));
    NMT_CHECK(tensor.defined(), CheckpointError, "{}: tensor {} is undefined", path,
              json::quote(name));
    NMT_CHECK(tensor.layout() == c10::kStrided, CheckpointError,
              "{}: tensor {} has layout {}; only dense (strided) tensors can be stored", path,
              json::quote(name), c10::toString(tensor.layout()));
    NMT_CHECK(names.insert(name).second, CheckpointError, "{}: duplicate tensor name {}", path,
              json::quote(name));
    PreparedTensor p;
    p.name = &name;
    try {
      p.dtype = safetensors_dtype_name(tensor);
    } catch (const CheckpointError& e) {
      NMT_THROW(CheckpointError, "{}: tensor {}: {}", path, json::quote(name), e.what());
    }
    // contiguous() returns the tensor itself when it already is, so CPU tensors are written
    // straight from their memory; a device tensor is copied once, into contiguous CPU memory.
    p.cpu = tensor.is_cpu()
                ? tensor.contiguous()
                : tensor.to(c10::Device(c10::kCPU), tensor.scalar_type(),
                            /*non_blocking=*/false, /*copy=*/false, c10::MemoryFormat::Contiguous);
    prepared.push_back(std::move(p));
  }
  return prepared;
}

/// Places the tensors in the data section and hashes their bytes into hash, in file order.
/// Returns the tensors in that order.
std::vector<PreparedTensor*> lay_out(std::vector<PreparedTensor>& prepared, XxHash64& hash) {
  // Header keys keep the caller's order; the bytes are laid out widest element first (as the
  // safetensors reference writer does) so that every tensor is aligned to its element size
  // in the file, which zero-copy readers rely on.
  std::vector<PreparedTensor*> layout;
  for (PreparedTensor& p : prepared) layout.push_back(&p);
  std::stable_sort(layout.begin(), layout.end(),
                   [](const PreparedTensor* a, const PreparedTensor* b) {
                     return a->cpu.element_size() > b->cpu.element_size();
                   });
  uint64_t offset = 0;
  for (PreparedTensor* p : layout) {
    const size_t bytes = p->cpu.nbytes();
    p->begin = offset;
    p->end = offset + bytes;
    offset = p->end;
    if (bytes > 0) hash.update(p->cpu.const_data_ptr(), bytes);
  }
  return layout;
}

/// Writes the file atomically: the header length, the header, the tensors in layout order.
void write_checkpoint(const std::filesystem::path& file, const std::string& header,
                      const std::vector<PreparedTensor*>& layout) {
  AtomicFileWriter writer(file);
  const uint64_t header_bytes = header.size();
  writer.write(&header_bytes, sizeof(header_bytes));
  writer.write(header.data(), header.size());
  for (const PreparedTensor* p : layout) {
    if (p->end > p->begin) writer.write(p->cpu.const_data_ptr(), p->end - p->begin);
  }
  writer.commit();
}

}  // namespace

const at::Tensor* CheckpointData::find(std::string_view name) const {
  for (const auto& [tensor_name, tensor] : tensors) {
    if (tensor_name == name) return &tensor;
  }
  return nullptr;
}

const at::Tensor& CheckpointData::at(std::string_view name) const {
  const at::Tensor* tensor = find(name);
  if (!tensor) {
    NMT_THROW(CheckpointError, "{}: no tensor {} (the checkpoint has {} tensors)",
              source.empty() ? std::string("checkpoint") : source.string(), json::quote(name),
              tensors.size());
  }
  return *tensor;
}

const std::string& CheckpointData::meta(std::string_view key) const {
  const auto it = metadata.find(std::string(key));
  if (it == metadata.end()) {
    NMT_THROW(CheckpointError, "{}: no metadata key {}",
              source.empty() ? std::string("checkpoint") : source.string(), json::quote(key));
  }
  return it->second;
}

void save_checkpoint(const std::filesystem::path& file, const CheckpointData& data) {
  const std::string path = file.string();
  check_metadata(data, path);

  // Gradients are irrelevant here, and the copies below must not be recorded by autograd.
  at::NoGradGuard no_grad;
  std::vector<PreparedTensor> prepared = prepare_tensors(data, path);
  XxHash64 hash;
  const std::vector<PreparedTensor*> layout = lay_out(prepared, hash);

  std::vector<TensorEntry> entries;
  for (const PreparedTensor& p : prepared) {
    entries.push_back({*p.name, p.cpu.scalar_type(),
                       std::vector<int64_t>(p.cpu.sizes().begin(), p.cpu.sizes().end()), p.begin,
                       p.end});
  }
  hash_header(hash, kFormatVersion, data.metadata, entries);
  std::map<std::string, std::string> metadata = data.metadata;
  metadata.emplace(kFormatKey, kFormatVersion);
  metadata.emplace(kChecksumKey, hex64(hash.digest()));
  // Compact JSON (nlohmann's dump()): the bytes every checkpoint has had, pinned by a test.
  nlohmann::ordered_json root{{std::string(kMetadataKey), metadata}};
  for (const PreparedTensor& p : prepared) {
    root[*p.name] = {
        {"dtype", p.dtype}, {"shape", p.cpu.sizes().vec()}, {"data_offsets", {p.begin, p.end}}};
  }
  std::string header = root.dump();
  // Spaces (valid JSON whitespace) pad the header so the data section starts 8-byte aligned.
  header.append((8 - header.size() % 8) % 8, ' ');

  write_checkpoint(file, header, layout);
}

namespace {

/// A whole file mapped copy-on-write (MAP_PRIVATE): its pages are the page cache's, shared
/// by every process that maps the file, until a process writes one (then that page is its own).
struct FileMapping {
  std::shared_ptr<char> base;  ///< unmapped with the last tensor that views it
  uint64_t size = 0;
};

FileMapping map_file(int fd, const std::filesystem::path& file) {
  struct stat info {};
  NMT_CHECK(::fstat(fd, &info) == 0, CheckpointError, "{}: cannot stat: {}", file.string(),
            std::strerror(errno));
  const auto size = static_cast<uint64_t>(info.st_size);
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  NMT_CHECK(base != MAP_FAILED, CheckpointError, "{}: cannot map: {}", file.string(),
            std::strerror(errno));
  return {std::shared_ptr<char>(static_cast<char*>(base), [size](char* p) { ::munmap(p, size); }),
          size};
}

/// The file mapped, checked to hold every byte `header` describes: read_header saw exactly
/// this size, and a file cut since then would fault where it is read.
FileMapping map_described(int fd, const std::filesystem::path& file, const Header& header) {
  FileMapping mapping = map_file(fd, file);
  uint64_t data_end = header.data_start;
  for (const TensorEntry& entry : header.tensors)
    data_end = std::max(data_end, header.data_start + entry.end);
  NMT_CHECK(mapping.size >= data_end, CheckpointError,
            "{}: truncated: {} bytes, the header describes {}", file.string(), mapping.size,
            data_end);
  return mapping;
}

/// The tensor `entry` as a view of the mapped file, or an undefined tensor where its data is
/// not aligned for its dtype (then it is read into memory of its own).
at::Tensor mapped_tensor(const FileMapping& mapping, const Header& header,
                         const TensorEntry& entry) {
  const auto options = at::TensorOptions().dtype(entry.type);
  char* data = mapping.base.get() + header.data_start + entry.begin;
  if (reinterpret_cast<uintptr_t>(data) % options.dtype().itemsize() != 0) return {};
  std::shared_ptr<char> keep = mapping.base;
  return at::from_blob(
      data, entry.shape, [keep](void*) mutable { keep.reset(); }, options);
}

/// Reads the tensors `header` describes that `keep` accepts (null: all) into data.tensors, in
/// header order, adding the bytes of every tensor to hash (if any), in file order; with
/// `read_all` false, the others are not read and hash is left incomplete. With no hash and a
/// `mapping`, a kept tensor's bytes are not touched here at all. With a `mapping` of the file,
/// kept tensors are views of it instead of copies.
void read_tensors(int fd, const std::filesystem::path& file, const Header& header,
                  CheckpointData& data, XxHash64* hash, const TensorFilter& keep = nullptr,
                  bool read_all = true, const FileMapping* mapping = nullptr) {
  data.source = file;
  data.metadata = header.metadata;
  std::vector<at::Tensor> kept(header.tensors.size());
  std::vector<char> viewed(header.tensors.size(), 0);
  for (size_t i = 0; i < header.tensors.size(); ++i) {
    const TensorEntry& entry = header.tensors[i];
    if (keep && !keep(entry.name)) continue;
    if (mapping) kept[i] = mapped_tensor(*mapping, header, entry);
    viewed[i] = kept[i].defined() ? 1 : 0;
    if (!viewed[i]) kept[i] = at::empty(entry.shape, at::TensorOptions().dtype(entry.type));
  }
  // Read each tensor straight into its memory, in file order, hashing as we go; one that is
  // not kept passes through a buffer of one piece.
  std::vector<size_t> order(header.tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(header.tensors[a].begin, header.tensors[a].end) <
           std::tie(header.tensors[b].begin, header.tensors[b].end);
  });
  std::vector<char> passing;
  for (const size_t i : order) {
    const TensorEntry& entry = header.tensors[i];
    if (!kept[i].defined() && !read_all) continue;
    if (viewed[i] && hash == nullptr) continue;  // nothing to read or hash
    const uint64_t bytes = entry.end - entry.begin;
    if (!kept[i].defined())
      passing.resize(static_cast<size_t>(std::min<uint64_t>(kReadChunkBytes, bytes)));
    for (uint64_t done = 0; done < bytes;) {
      const size_t piece = static_cast<size_t>(std::min<uint64_t>(kReadChunkBytes, bytes - done));
      char* out =
          kept[i].defined() ? static_cast<char*>(kept[i].data_ptr()) + done : passing.data();
      if (!viewed[i]) read_at(fd, file, out, piece, header.data_start + entry.begin + done);
      if (hash) hash->update(out, piece);
      done += piece;
    }
  }
  data.tensors.reserve(header.tensors.size());
  for (size_t i = 0; i < header.tensors.size(); ++i)
    if (kept[i].defined()) data.tensors.emplace_back(header.tensors[i].name, std::move(kept[i]));
}

}  // namespace

namespace {

CheckpointData load_checkpoint(const std::filesystem::path& file, const TensorFilter& keep,
                               bool mapped) {
  const int fd = open_for_reading(file);
  FdCloser closer(fd);
  Header header = read_header(fd, file, HeaderKind::kCheckpoint);
  const std::optional<FileMapping> mapping =
      mapped ? std::optional<FileMapping>(map_described(fd, file, header)) : std::nullopt;
  CheckpointData data;
  XxHash64 hash;
  read_tensors(fd, file, header, data, &hash, keep, /*read_all=*/true,
               mapping ? &*mapping : nullptr);
  const bool covers_header = header.format != kFormatVersion1;
  if (covers_header) hash_header(hash, header.format, data.metadata, header.tensors);
  const std::string computed = hex64(hash.digest());
  NMT_CHECK(computed == header.checksum, CheckpointError,
            "{}: checksum mismatch: the {} hashes to {}, the header says {} (the file is "
            "corrupt)",
            file.string(), covers_header ? "content" : "data", computed, header.checksum);
  // The one place old attention layouts are read: the readers downstream know only the fused.
  fuse_legacy_attention(data.tensors, file.string());
  return data;
}

}  // namespace

CheckpointData load_checkpoint(const std::filesystem::path& file, const TensorFilter& keep) {
  return load_checkpoint(file, keep, /*mapped=*/false);
}

CheckpointData map_checkpoint(const std::filesystem::path& file, const TensorFilter& keep) {
  return load_checkpoint(file, keep, /*mapped=*/true);
}

CheckpointData load_checkpoint(const std::filesystem::path& file) {
  return load_checkpoint(file, nullptr);
}

CheckpointData read_checkpoint_tensors(const std::filesystem::path& file,
                                       const TensorFilter& keep) {
  const int fd = open_for_reading(file);
  FdCloser closer(fd);
  const Header header = read_header(fd, file, HeaderKind::kCheckpoint);
  CheckpointData data;
  // No checksum: it covers the bytes not read too.
  read_tensors(fd, file, header, data, nullptr, keep, /*read_all=*/false);
  return data;
}

std::map<std::string, std::string> read_checkpoint_metadata(const std::filesystem::path& file) {
  const int fd = open_for_reading(file);
  FdCloser closer(fd);
  return read_header(fd, file, HeaderKind::kCheckpoint).metadata;
}

std::vector<std::string> read_checkpoint_tensor_names(const std::filesystem::path& file) {
  const int fd = open_for_reading(file);
  FdCloser closer(fd);
  std::vector<std::string> names;
  for (const TensorEntry& entry : read_header(fd, file, HeaderKind::kCheckpoint).tensors)
    names.push_back(entry.name);
  return names;
}

CheckpointData load_safetensors(const std::filesystem::path& file) {
  const int fd = open_for_reading(file);
  FdCloser closer(fd);
  const Header header = read_header(fd, file, HeaderKind::kAny);
  CheckpointData data;
  read_tensors(fd, file, header, data, nullptr);  // no checksum to compare with
  return data;
}

CheckpointData map_safetensors(const std::filesystem::path& file) {
  const int fd = open_for_reading(file);
  FdCloser closer(fd);
  const Header header = read_header(fd, file, HeaderKind::kAny);
  const FileMapping mapping = map_described(fd, file, header);
  CheckpointData data;
  read_tensors(fd, file, header, data, nullptr, nullptr, /*read_all=*/true, &mapping);
  return data;
}

}  // namespace nmt::checkpoint
