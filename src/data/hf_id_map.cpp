#include "data/hf_id_map.h"

#include <sentencepiece_processor.h>

#include "util/error.h"

namespace nmt::data {
namespace {

/// SentencePiece's word-start mark, U+2581.
constexpr std::string_view kSpaceMark = "\xE2\x96\x81";

std::string replace_space_marks(std::string text) {
  for (size_t at = text.find(kSpaceMark); at != std::string::npos;
       at = text.find(kSpaceMark, at + 1))
    text.replace(at, kSpaceMark.size(), " ");
  return text;
}

/// True when `tail` (text after a line's last piece) normalizes to a space, not to nothing:
/// between two letters it then splits them into two words.
bool ends_in_space(const sentencepiece::SentencePieceProcessor& processor, std::string_view tail) {
  std::vector<std::string> pieces;
  const std::string probe = "a" + std::string(tail) + "a";
  if (!processor.Encode(probe, &pieces).ok()) return false;
  std::string joined;
  for (const std::string& piece : pieces) joined += piece;
  return joined == std::string(kSpaceMark) + "a" + std::string(kSpaceMark) + "a";
}

}  // namespace

HfIdMap::HfIdMap(TokenTable table,
                 std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor_ptr,
                 const std::string& name)
    : table_(std::move(table)), processor_(std::move(processor_ptr)) {
  const sentencepiece::SentencePieceProcessor& processor = *processor_;
  const auto size = static_cast<int32_t>(table_.tokens.size());
  special_.assign(static_cast<size_t>(size), false);
  for (int32_t id : table_.special_ids) special_[static_cast<size_t>(id)] = true;
  for (int32_t id : {table_.pad_id, table_.unk_id, table_.eos_id, table_.decoder_start_id})
    NMT_CHECK(is_special(id), DataError,
              "{}: Hugging Face vocabulary: id {} ({}) is the pad, unk, eos or decoder start id "
              "but not among the special ids",
              name, id, id >= 0 && id < size ? table_.tokens[static_cast<size_t>(id)] : "?");
  for (int32_t id : table_.language_ids)
    NMT_CHECK(is_special(id), DataError,
              "{}: Hugging Face vocabulary: language code {} (id {}) is not among the special ids",
              name, table_.tokens[static_cast<size_t>(id)], id);
  // The first id of a token wins, as a dict built from the tokenizer's id -> token list would
  // have it only if unique; Hugging Face's tables hold each token once.
  ids_by_token_.reserve(table_.tokens.size());
  for (int32_t id = 0; id < size; ++id)
    ids_by_token_.emplace(table_.tokens[static_cast<size_t>(id)], id);
  // Every piece's id, computed once: encoding looks up only pieces the model does not know.
  id_of_piece_.resize(static_cast<size_t>(processor.GetPieceSize()), table_.unk_id);
  for (int piece = 0; piece < processor.GetPieceSize(); ++piece) {
    if (processor.IsUnknown(piece) || processor.IsControl(piece)) continue;
    if (const auto id = token_id(processor.IdToPiece(piece))) id_of_piece_[piece] = *id;
  }
}

std::optional<int32_t> HfIdMap::token_id(std::string_view token) const {
  const auto found = ids_by_token_.find(std::string(token));
  if (found == ids_by_token_.end()) return std::nullopt;
  return found->second;
}

std::vector<int32_t> HfIdMap::encode(std::string_view text) const {
  const sentencepiece::SentencePieceProcessor& processor = *processor_;
  sentencepiece::ImmutableSentencePieceText pieces;
  const auto status =
      processor.Encode(absl::string_view(text.data(), text.size()), pieces.mutable_proto());
  NMT_CHECK(status.ok(), DataError, "SentencePiece cannot encode a line: {}", status.ToString());
  std::vector<int32_t> ids;
  ids.reserve(pieces.pieces_size());
  for (size_t i = 0; i < pieces.pieces_size(); ++i) {
    const auto piece = pieces.pieces(static_cast<int>(i));
    const auto spm_id = static_cast<int>(piece.id());
    if (!processor.IsUnknown(spm_id)) {
      ids.push_back(id_of_piece_[static_cast<size_t>(spm_id)]);
      continue;
    }
    // An unknown piece is its text (e.g. "▁😀"): Marian and M2M100 look that up in vocab.json,
    // which may hold it (Marian's is made of both sides' models); NLLB goes by the unk id.
    std::optional<int32_t> id;
    if (table_.unknown_by_text) id = token_id(piece.piece());
    ids.push_back(id && !is_special(*id) ? *id : table_.unk_id);
  }
  // NLLB's tokenizer (transformers 5: tokenizers' Metaspace pre-tokenizer, then BPE) keeps a
  // final space as the piece ▁, where SentencePiece drops it.
  if (table_.kind == HfTokenizerKind::kNllb) {
    const size_t end = pieces.pieces_size() == 0
                           ? 0
                           : pieces.pieces(static_cast<int>(pieces.pieces_size() - 1)).end();
    if (end < text.size() && ends_in_space(processor, text.substr(end))) {
      const std::optional<int32_t> space = token_id(kSpaceMark);
      ids.push_back(space ? *space : table_.unk_id);
    }
  }
  return ids;
}

std::string HfIdMap::decode(const std::vector<int32_t>& ids) const {
  std::vector<std::string> pieces;
  pieces.reserve(ids.size());
  for (int32_t id : ids)
    if (id >= 0 && id < size() && !is_special(id))
      pieces.push_back(table_.tokens[static_cast<size_t>(id)]);
  std::string text;
  if (table_.kind == HfTokenizerKind::kNllb) {
    // tokenizers' Metaspace decoder: the pieces joined, ▁ as a space, the first one dropped.
    for (const std::string& piece : pieces) text += piece;
    text = replace_space_marks(text);
    return text.empty() || text.front() != ' ' ? text : text.substr(1);
  }
  const auto status = processor_->Decode(pieces, &text);
  NMT_CHECK(status.ok(), DataError, "SentencePiece cannot decode ids: {}", status.ToString());
  // MarianTokenizer turns the ▁ of pieces its decoding model lacks (written as they are)
  // into spaces; both it and M2M100Tokenizer strip the outer whitespace (Python's strip()).
  if (table_.kind == HfTokenizerKind::kMarian) text = replace_space_marks(text);
  const char* kWhitespace = " \t\n\r\f\v";
  const size_t begin = text.find_first_not_of(kWhitespace);
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(kWhitespace) - begin + 1);
}

}  // namespace nmt::data
