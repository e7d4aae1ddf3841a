#pragma once
// The one edit nmt-train makes to a SentencePiece model: the type of chosen pieces, written
// into the serialized ModelProto. Written by hand because Debian's libsentencepiece-dev ships
// neither sentencepiece_model.pb.h nor the .proto it comes from, and the edit is tiny: the
// model's field 1 holds one SentencePiece message per piece (field 1: the piece, field 2: its
// score, field 3: its type, a one-byte varint), so retyping a piece rewrites one byte and
// every length around it stays as it was.
//
// vocab.cpp uses it to load a model trained with the tags as user-defined symbols (as
// nmt-train's first vocabularies have them) with those tags as control symbols: same ids, same
// encoding of any text without the tag strings, and text cannot produce them.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace nmt::data {

/// SentencePiece's piece types (sentencepiece_model.proto, ModelProto.SentencePiece.Type).
enum class PieceType : uint8_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

/// What retype_pieces changed.
struct RetypedModel {
  std::string bytes;                 ///< the model, with the pieces retyped
  std::vector<std::string> retyped;  ///< the pieces it retyped, in id order
};

/// `model` (a serialized ModelProto) with every piece of type `from` for which `select(piece)`
/// holds retyped to `to`. Only a type written in the bytes is matched (SentencePiece writes
/// every type but the default, kNormal). Throws DataError naming `name` when the bytes are
/// not a well-formed ModelProto.
RetypedModel retype_pieces(std::string model, PieceType from, PieceType to,
                           const std::function<bool(std::string_view)>& select,
                           const std::string& name);

}  // namespace nmt::data
