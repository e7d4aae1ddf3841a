#include "checkpoint/checkpoint_file.h"
#include "checkpoint/legacy_attention.h"

#include "util/utf8.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <fmt/format.h>

#include "checkpoint/header_json.h"
#include "checkpoint/safetensors_io.h"
#include "util/atomic_file.h"
#include "checkpoint/xxhash64.h"
#include "util/error.h"
#include "util/json_text.h"
#include "util/shape.h"

namespace nmt::checkpoint {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors is little-endian and tensors are written from memory as they are");

constexpr std::string_view kMetadataKey = "__metadata__";
// The safetensors reference implementation refuses larger headers; so do we, which also
// keeps a garbage length from turning into a huge allocation.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// Reads of a large tensor go in pieces so that each is hashed while still in the cache.
constexpr size_t kReadChunkBytes = 64 << 20;

/// A parsed and checked header.
struct Header {
  std::map<std::string, std::string> metadata;  ///< without the nmt.* keys
  std::string format;                           ///< nmt.format
  std::string checksum;                         ///< nmt.checksum
  std::vector<TensorEntry> tensors;             ///< in header order
  uint64_t data_start = 0;                      ///< file offset of the data section
};

/// Turns one "name": {dtype, shape, data_offsets} header entry into a TensorEntry.
TensorEntry parse_entry(const std::filesystem::path& file, const std::string& name,
                        const nlohmann::ordered_json& value) {
  const auto bad = [&](std::string_view what) {
    NMT_THROW(CheckpointError, "{}: header: tensor {}: {}", file.string(), json::quote(name), what);
  };
  if (!value.is_object()) bad(fmt::format("expected an object, found {}", value.type_name()));
  TensorEntry entry;
  entry.name = name;
  bool has_dtype = false, has_shape = false, has_offsets = false;
  for (const auto& [key, field] : value.items()) {
    if (key == "dtype") {
      if (!field.is_string()) bad("dtype: expected a string");
      const auto& dtype = field.get_ref<const std::string&>();
      const auto type = dtype_from_name(dtype);
      if (!type) {
        bad(fmt::format("dtype {} is not supported (supported: {})", json::quote(dtype),
                        kSupportedDtypes));
      }
      entry.type = *type;
      has_dtype = true;
    } else if (key == "shape") {
      if (!field.is_array()) bad("shape: expected an array of integers");
      for (const auto& dim : field) {
        if (!dim.is_number_integer() || dim.get<int64_t>() < 0)
          bad("shape: expected an array of integers >= 0");
        entry.shape.push_back(dim.get<int64_t>());
      }
      has_shape = true;
    } else if (key == "data_offsets") {
      if (!field.is_array() || field.size() != 2 || !field[0].is_number_integer() ||
          !field[1].is_number_integer() || field[0].get<int64_t>() < 0 ||
          field[1].get<int64_t>() < field[0].get<int64_t>()) {
        bad("data_offsets: expected [begin, end] with 0 <= begin <= end");
      }
      entry.begin = field[0].get<uint64_t>();
      entry.end = field[1].get<uint64_t>();
      has_offsets = true;
    } else {
      bad(fmt::format("unexpected field {}", json::quote(key)));
    }
  }
  if (!has_dtype || !has_shape || !has_offsets) bad("needs dtype, shape and data_offsets");
  uint64_t bytes = c10::elementSize(entry.type);
  for (const int64_t dim : entry.shape) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes))
      bad(fmt::format("shape {} is too large", shape_string(entry.shape)));
  }
  if (bytes != entry.end - entry.begin) {
    bad(fmt::format("data_offsets [{}, {}] hold {} bytes, but {} {} needs {}", entry.begin,
                    entry.end, entry.end - entry.begin, dtype_name(entry.type),
                    shape_string(entry.shape), bytes));
  }
  return entry;
}

/// The start of a checkpoint file: its size, the header length (the first 8 bytes) and the
/// header's JSON text.
struct HeaderText {
  uint64_t file_size = 0;     ///< bytes in the file
  uint64_t header_bytes = 0;  ///< bytes of JSON after the first 8
  std::string text;           ///< the JSON
};

/// Reads the header length and the header's text, checking that the file is a regular file
/// long enough to hold them and that the length is plausible.
HeaderText read_header_text(int fd, const std::filesystem::path& file) {
  const std::string path = file.string();
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    NMT_THROW(CheckpointError, "{}: cannot stat: {}", path, std::strerror(errno));
  NMT_CHECK(S_ISREG(st.st_mode), CheckpointError, "{}: not a regular file", path);
  const auto file_size = static_cast<uint64_t>(st.st_size);
  NMT_CHECK(file_size > 0, CheckpointError, "{}: empty file (0 bytes), not a checkpoint", path);
  NMT_CHECK(file_size >= 8, CheckpointError,
            "{}: truncated: {} bytes, shorter than the 8-byte header length", path, file_size);
  uint64_t header_bytes = 0;
  read_at(fd, file, &header_bytes, sizeof(header_bytes), 0);
  NMT_CHECK(header_bytes <= kMaxHeaderBytes, CheckpointError,
            "{}: not a checkpoint: the first 8 bytes give a header length of {} (at most {})", path,
            header_bytes, kMaxHeaderBytes);
  NMT_CHECK(8 + header_bytes <= file_size, CheckpointError,
            "{}: truncated: {} bytes, header says its JSON alone ends at byte {}", path, file_size,
            8 + header_bytes);
  std::string text(header_bytes, '\0');
  read_at(fd, file, text.data(), text.size(), 8);
  return {file_size, header_bytes, std::move(text)};
}

/// Checks that the tensors' offsets tile the data section exactly (no gaps, no overlaps,
/// nothing after the last) and that the file has exactly that many bytes.
void check_data_layout(const Header& header, uint64_t file_size, const std::string& path) {
  std::vector<const TensorEntry*> by_offset;
  for (const TensorEntry& entry : header.tensors) by_offset.push_back(&entry);
  // By (begin, end): an empty tensor may share its begin with the tensor after it.
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorEntry* a, const TensorEntry* b) {
    return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
  });
  uint64_t expected_begin = 0;
  for (const TensorEntry* entry : by_offset) {
    NMT_CHECK(entry->begin == expected_begin, CheckpointError,
              "{}: header: tensor {}: data_offsets [{}, {}] {} (expected it to begin at {})", path,
              json::quote(entry->name), entry->begin, entry->end,
              entry->begin < expected_begin ? "overlap another tensor" : "leave a gap",
              expected_begin);
    expected_begin = entry->end;
  }
  const uint64_t expected_size = header.data_start + expected_begin;
  NMT_CHECK(file_size >= expected_size, CheckpointError, "{}: truncated: {} bytes, header says {}",
            path, file_size, expected_size);
  NMT_CHECK(file_size == expected_size, CheckpointError,
            "{}: {} bytes, but the header accounts for only {} (trailing data)", path, file_size,
            expected_size);
}

/// Which safetensors files a reader accepts.
enum class HeaderKind {
  kCheckpoint,  ///< ours: nmt.format and nmt.checksum required
  kAny,         ///< any safetensors file (e.g. transformers' model.safetensors)
};

/// Reads and checks everything but the tensor bytes: header length, JSON, nmt.format (for a
/// checkpoint), entries, that the offsets tile the data section and that the file has exactly
/// that many bytes.
Header read_header(int fd, const std::filesystem::path& file, HeaderKind kind) {
  const std::string path = file.string();
  const auto [file_size, header_bytes, text] = read_header_text(fd, file);

  nlohmann::ordered_json root;
  try {
    root = parse_header_json(text);
  } catch (const HeaderJsonError& e) {
    NMT_THROW(CheckpointError, "{}: not a checkpoint: the header is not valid JSON ({})", path,
              e.what());
  }
  NMT_CHECK(root.is_object(), CheckpointError,
            "{}: not a checkpoint: the header is a JSON {}, expected an object", path,
            root.type_name());

  Header header;
  header.data_start = 8 + header_bytes;
  bool has_format = false, has_checksum = false;
  for (const auto& [key, value] : root.items()) {
    if (key != kMetadataKey) continue;
    NMT_CHECK(value.is_object(), CheckpointError,
              "{}: header: __metadata__ must be an object of strings", path);
    for (const auto& [meta_key, meta_value] : value.items()) {
      NMT_CHECK(meta_value.is_string(), CheckpointError,
                "{}: header: __metadata__ {}: expected a string, found {}", path,
                json::quote(meta_key), meta_value.type_name());
      const auto& text_value = meta_value.get_ref<const std::string&>();
      if (kind == HeaderKind::kAny) {
        header.metadata.emplace(meta_key, text_value);
      } else if (meta_key == kFormatKey) {
        NMT_CHECK(text_value == kFormatVersion || text_value == kFormatVersion1, CheckpointError,
                  "{}: unsupported checkpoint format {} (this build reads {} and {})", path,
                  json::quote(text_value), kFormatVersion1, kFormatVersion);
        header.format = text_value;
        has_format = true;
      } else if (meta_key == kChecksumKey) {
        header.checksum = text_value;
        has_checksum = true;
      } else {
        header.metadata.emplace(meta_key, text_value);
      }
    }
  }
  NMT_CHECK(kind == HeaderKind::kAny || has_format, CheckpointError,
            "{}: not an nmt-train checkpoint: a safetensors file without {} in its metadata", path,
            kFormatKey);
  NMT_CHECK(kind == HeaderKind::kAny || has_checksum, CheckpointError,
            "{}: header: no {} in the metadata", path, kChecksumKey);

  for (const auto& [key, value] : root.items()) {
    if (key != kMetadataKey) header.tensors.push_back(parse_entry(file, key, value));
  }
  check_data_layout(header, file_size, path);
  return header;
}

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

/// Reads the tensors `header` describes into data.tensors, in file order, adding their bytes
/// to hash.
void read_tensors(int fd, const std::filesystem::path& file, const Header& header,
                  CheckpointData& data, XxHash64& hash) {
  data.source = file;
  data.metadata = header.metadata;
  data.tensors.reserve(header.tensors.size());
  for (const TensorEntry& entry : header.tensors) {
    data.tensors.emplace_back(entry.name,
                              at::empty(entry.shape, at::TensorOptions().dtype(entry.type)));
  }
  // Read each tensor straight into its memory, in file order, hashing as we go.
  std::vector<size_t> order(header.tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(header.tensors[a].begin, header.tensors[a].end) <
           std::tie(header.tensors[b].begin, header.tensors[b].end);
  });
  for (const size_t i : order) {
    const TensorEntry& entry = header.tensors[i];
    auto* out = static_cast<char*>(data.tensors[i].second.data_ptr());
    for (uint64_t done = 0; done < entry.end - entry.begin;) {
      const size_t piece =
          static_cast<size_t>(std::min<uint64_t>(kReadChunkBytes, entry.end - entry.begin - done));
      read_at(fd, file, out + done, piece, header.data_start + entry.begin + done);
      hash.update(out + done, piece);
      done += piece;
    }
  }
}

}  // namespace

CheckpointData load_checkpoint(const std::filesystem::path& file) {
  const int fd = open_for_reading(file);
  FdCloser closer(fd);
  Header header = read_header(fd, file, HeaderKind::kCheckpoint);
  CheckpointData data;
  XxHash64 hash;
  read_tensors(fd, file, header, data, hash);
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

std::map<std::string, std::string> read_checkpoint_metadata(const std::filesystem::path& file) {
  const int fd = open_for_reading(file);
  FdCloser closer(fd);
  return read_header(fd, file, HeaderKind::kCheckpoint).metadata;
}

CheckpointData load_safetensors(const std::filesystem::path& file) {
  const int fd = open_for_reading(file);
  FdCloser closer(fd);
  const Header header = read_header(fd, file, HeaderKind::kAny);
  CheckpointData data;
  XxHash64 unused;  // no checksum to compare with
  read_tensors(fd, file, header, data, unused);
  return data;
}

}  // namespace nmt::checkpoint
