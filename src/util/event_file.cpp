#include "util/event_file.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "util/error.h"

namespace nmt::event_file {
namespace {

/// The byte-at-a-time table of the reflected Castagnoli polynomial.
const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

void put_fixed(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t get_fixed(std::string_view in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= uint64_t(static_cast<uint8_t>(in[i])) << (8 * i);
  return value;
}

// Protobuf wire format: a key is (field << 3 | wire type); 0 varint, 1 fixed64, 2 bytes,
// 5 fixed32.
void put_varint(std::string& out, uint64_t value) {
  for (; value >= 0x80; value >>= 7) out.push_back(static_cast<char>((value & 0x7f) | 0x80));
  out.push_back(static_cast<char>(value));
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_varint(out, uint64_t(field) << 3 | 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}

/// Reads protobuf fields from a message's bytes.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool done() const { return pos_ == in_.size(); }
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      need(1);
      const auto byte = static_cast<uint8_t>(in_[pos_++]);
      value |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    NMT_THROW(Error, "event: a varint longer than 10 bytes at byte {}", pos_);
  }
  uint64_t fixed(int bytes) {
    need(bytes);
    const uint64_t value = get_fixed(in_.substr(pos_), bytes);
    pos_ += bytes;
    return value;
  }
  std::string_view bytes() {
    const uint64_t size = varint();
    need(size);
    const std::string_view out = in_.substr(pos_, size);
    pos_ += size;
    return out;
  }
  /// Skips a field of a type this subset does not read.
  void skip(int wire_type) {
    switch (wire_type) {
      case 0:
        varint();
        return;
      case 1:
        fixed(8);
        return;
      case 2:
        bytes();
        return;
      case 5:
        fixed(4);
        return;
      default:
        NMT_THROW(Error, "event: unsupported wire type {} at byte {}", wire_type, pos_);
    }
  }

 private:
  void need(uint64_t n) const {
    NMT_CHECK(n <= in_.size() - pos_, Error, "event: message ends at byte {}, {} more expected",
              in_.size(), n);
  }
  std::string_view in_;
  size_t pos_ = 0;
};

template <class To, class From>
To bit_cast(From from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  std::memcpy(&to, &from, sizeof(to));
  return to;
}

Scalar decode_value(std::string_view bytes) {
  Scalar scalar;
  Reader r(bytes);
  while (!r.done()) {
    const uint64_t key = r.varint();
    if (key == (1 << 3 | 2))
      scalar.tag = std::string(r.bytes());
    else if (key == (2 << 3 | 5))
      scalar.value = bit_cast<float>(uint32_t(r.fixed(4)));
    else
      r.skip(int(key & 7));
  }
  return scalar;
}

}  // namespace

uint32_t crc32c(std::string_view data) {
  const auto& table = crc_table();
  uint32_t c = 0xffffffffu;
  for (const char ch : data) c = table[(c ^ static_cast<uint8_t>(ch)) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string frame_record(std::string_view payload) {
  std::string out;
  put_fixed(out, payload.size(), 8);
  put_fixed(out, masked_crc32c(out), 4);
  out.append(payload);
  put_fixed(out, masked_crc32c(payload), 4);
  return out;
}

std::string encode_event(const Event& event) {
  std::string out;
  if (event.wall_time != 0) {
    put_varint(out, 1 << 3 | 1);
    put_fixed(out, bit_cast<uint64_t>(event.wall_time), 8);
  }
  if (event.step != 0) {
    put_varint(out, 2 << 3 | 0);
    put_varint(out, static_cast<uint64_t>(event.step));
  }
  if (!event.file_version.empty()) put_bytes(out, 3, event.file_version);
  if (!event.scalars.empty()) {
    std::string summary;
    for (const Scalar& s : event.scalars) {
      std::string value;
      if (!s.tag.empty()) put_bytes(value, 1, s.tag);
      // simple_value is a member of a oneof: written even when 0.
      put_varint(value, 2 << 3 | 5);
      put_fixed(value, bit_cast<uint32_t>(s.value), 4);
      put_bytes(summary, 1, value);
    }
    put_bytes(out, 5, summary);
  }
  return out;
}

Event decode_event(std::string_view payload) {
  Event event;
  Reader r(payload);
  while (!r.done()) {
    const uint64_t key = r.varint();
    if (key == (1 << 3 | 1)) {
      event.wall_time = bit_cast<double>(r.fixed(8));
    } else if (key == (2 << 3 | 0)) {
      event.step = static_cast<int64_t>(r.varint());
    } else if (key == (3 << 3 | 2)) {
      event.file_version = std::string(r.bytes());
    } else if (key == (5 << 3 | 2)) {
      Reader summary(r.bytes());
      while (!summary.done()) {
        const uint64_t k = summary.varint();
        if (k == (1 << 3 | 2))
          event.scalars.push_back(decode_value(summary.bytes()));
        else
          summary.skip(int(k & 7));
      }
    } else {
      r.skip(int(key & 7));
    }
  }
  return event;
}

RecordScan read_records(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  NMT_CHECK(in.good(), Error, "{}: cannot open for reading: {}", file.string(),
            std::strerror(errno));
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  NMT_CHECK(!in.bad(), Error, "{}: read failed: {}", file.string(), std::strerror(errno));
  RecordScan scan;
  size_t pos = 0;
  while (pos < data.size()) {
    const std::string_view rest = std::string_view(data).substr(pos);
    if (rest.size() < 16) break;  // not even an empty record
    const uint64_t size = get_fixed(rest, 8);
    if (uint32_t(get_fixed(rest.substr(8), 4)) != masked_crc32c(rest.substr(0, 8))) break;
    if (size > rest.size() - 16) break;
    const std::string_view payload = rest.substr(12, size);
    if (uint32_t(get_fixed(rest.substr(12 + size), 4)) != masked_crc32c(payload)) break;
    scan.payloads.emplace_back(payload);
    pos += 16 + size;
  }
  scan.intact_bytes = pos;
  scan.damaged_tail = pos < data.size();
  return scan;
}

}  // namespace nmt::event_file
