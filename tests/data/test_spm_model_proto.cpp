// The byte edit of a serialized SentencePiece ModelProto (data/spm_model_proto.h): only the
// chosen pieces of the chosen type change, by one byte each; malformed bytes are an error
// naming the model.
#include "catch_torch.h"  // first: see the header

#include "data/spm_model_proto.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::data::PieceType;

namespace {

/// A SentencePiece message: the piece (field 1), score 0 (field 2), the type (field 3).
std::string piece_message(const std::string& piece, int type) {
  std::string m = "\x0a" + std::string(1, char(piece.size())) + piece;
  m += std::string("\x15\0\0\0\0", 5);
  m += "\x18" + std::string(1, char(type));
  return "\x0a" + std::string(1, char(m.size())) + m;
}

/// A ModelProto: three pieces and a trainer spec (field 2) that holds a user-defined symbol.
std::string model_bytes() {
  return piece_message("<BT>", 4) + piece_message("<2de>", 4) + piece_message("de", 1) +
         std::string("\x12\x07\xf2\x01\x04<BT>", 9);
}

bool all(std::string_view) { return true; }

}  // namespace

TEST_CASE("retyping pieces rewrites the type byte of the chosen pieces only", "[data]") {
  const std::string model = model_bytes();
  const auto bt_only = [](std::string_view piece) { return piece == "<BT>"; };
  const auto out = nmt::data::retype_pieces(model, PieceType::kUserDefined, PieceType::kControl,
                                            bt_only, "m.model");
  CHECK(out.retyped == std::vector<std::string>{"<BT>"});
  REQUIRE(out.bytes.size() == model.size());
  std::string expected = model;
  const size_t type_of_bt = piece_message("<BT>", 4).size() - 1;
  expected[type_of_bt] = 3;
  CHECK(out.bytes == expected);

  // Every user-defined piece; the normal one and the trainer spec's copy stay.
  const auto every =
      nmt::data::retype_pieces(model, PieceType::kUserDefined, PieceType::kControl, all, "m.model");
  CHECK(every.retyped == std::vector<std::string>{"<BT>", "<2de>"});
  const size_t untouched = piece_message("<BT>", 4).size() + piece_message("<2de>", 4).size();
  CHECK(every.bytes.substr(untouched) == model.substr(untouched));
  CHECK(every.bytes[untouched - 1] == 3);
  // And back: the round trip gives the original bytes.
  CHECK(nmt::data::retype_pieces(every.bytes, PieceType::kControl, PieceType::kUserDefined, all,
                                 "m.model")
            .bytes == model);
  // Nothing of the type: nothing changes.
  const auto none =
      nmt::data::retype_pieces(model, PieceType::kByte, PieceType::kControl, all, "m.model");
  CHECK(none.retyped.empty());
  CHECK(none.bytes == model);
}

TEST_CASE("a malformed ModelProto is an error naming the model", "[data]") {
  const std::string model = model_bytes();
  for (const std::string& bad : {model.substr(0, model.size() - 3), std::string("\x0a\x7f\x0a", 3),
                                 std::string("\x0b\x01", 2), std::string("\x08\xff\xff", 3)}) {
    CHECK_THROWS_AS(nmt::data::retype_pieces(bad, PieceType::kUserDefined, PieceType::kControl, all,
                                             "bad.model"),
                    nmt::DataError);
    CHECK_THROWS_WITH(nmt::data::retype_pieces(bad, PieceType::kUserDefined, PieceType::kControl,
                                               all, "bad.model"),
                      Contains("bad.model: not a SentencePiece model"));
  }
}
