#include "checkpoint/safetensors_header.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>

#include <fmt/format.h>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/header_json.h"
#include "util/error.h"
#include "util/json_text.h"
#include "util/shape.h"

namespace nmt::checkpoint {
namespace {

// The safetensors reference implementation refuses larger headers; so do we, which also
// keeps a garbage length from turning into a huge allocation.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

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

}  // namespace

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

}  // namespace nmt::checkpoint
