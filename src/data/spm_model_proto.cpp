#include "data/spm_model_proto.h"

#include "util/error.h"

namespace nmt::data {
namespace {

// Protocol buffer wire types.
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;
// ModelProto.pieces, and SentencePiece.piece / .type.
constexpr uint32_t kPiecesField = 1, kPieceField = 1, kTypeField = 3;

/// Reads the wire format of bytes [pos, end) of a model; throws DataError at a bad byte.
class WireReader {
 public:
  WireReader(const std::string& bytes, size_t pos, size_t end, const std::string& name)
      : bytes_(bytes), pos_(pos), end_(end), name_(name) {}
  bool done() const { return pos_ >= end_; }
  size_t pos() const { return pos_; }

  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      check(pos_ < end_, "a number runs past its message");
      const auto byte = static_cast<uint8_t>(bytes_[pos_++]);
      value |= uint64_t(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    check(false, "a number longer than 10 bytes");
    return 0;
  }

  /// The length of a length-delimited field, checked against the message's end.
  size_t length() {
    const uint64_t n = varint();
    check(n <= end_ - pos_, "a field runs past its message");
    return static_cast<size_t>(n);
  }

  /// Skips the value of a field of `wire_type`.
  void skip(uint32_t wire_type) {
    switch (wire_type) {
      case kVarint:
        varint();
        return;
      case kFixed64:
        advance(8);
        return;
      case kLengthDelimited:
        advance(length());
        return;
      case kFixed32:
        advance(4);
        return;
      default:
        check(false, "unknown wire type " + std::to_string(wire_type));
    }
  }

  void advance(size_t n) {
    check(n <= end_ - pos_, "a field runs past its message");
    pos_ += n;
  }

  void check(bool ok, const std::string& what) const {
    NMT_CHECK(ok, DataError, "{}: not a SentencePiece model ({} at byte {})", name_, what, pos_);
  }

 private:
  const std::string& bytes_;
  size_t pos_, end_;
  const std::string& name_;
};

}  // namespace

RetypedModel retype_pieces(std::string model, PieceType from, PieceType to,
                           const std::function<bool(std::string_view)>& select,
                           const std::string& name) {
  RetypedModel out;
  WireReader top(model, 0, model.size(), name);
  while (!top.done()) {
    const uint64_t key = top.varint();
    const auto field = static_cast<uint32_t>(key >> 3), wire = static_cast<uint32_t>(key & 7);
    if (field != kPiecesField || wire != kLengthDelimited) {
      top.skip(wire);
      continue;
    }
    const size_t size = top.length();
    WireReader piece(model, top.pos(), top.pos() + size, name);
    top.advance(size);
    std::string_view text;
    size_t type_at = 0;  // the byte of the type's value
    uint64_t type = 0;
    size_t type_bytes = 0;
    while (!piece.done()) {
      const uint64_t piece_key = piece.varint();
      const auto piece_field = static_cast<uint32_t>(piece_key >> 3);
      const auto piece_wire = static_cast<uint32_t>(piece_key & 7);
      if (piece_field == kPieceField && piece_wire == kLengthDelimited) {
        const size_t n = piece.length();
        text = std::string_view(model).substr(piece.pos(), n);
        piece.advance(n);
      } else if (piece_field == kTypeField && piece_wire == kVarint) {
        type_at = piece.pos();
        type = piece.varint();
        type_bytes = piece.pos() - type_at;
      } else {
        piece.skip(piece_wire);
      }
    }
    // A one-byte value (every type is below 128) is rewritten in place.
    if (type_bytes == 1 && type == static_cast<uint64_t>(from) && select(text)) {
      model[type_at] = static_cast<char>(to);
      out.retyped.emplace_back(text);
    }
  }
  out.bytes = std::move(model);
  return out;
}

}  // namespace nmt::data
