#pragma once
// Text to ids and back as a Hugging Face tokenizer does it, over one SentencePiece model and
// a TokenTable (data/token_table.h): the model cuts text into pieces, the table gives each
// piece its id (vocab.json, or fairseq's SentencePiece id + 1). The IdMap (data/id_map.h) of
// a vocabulary imported from Hugging Face (hf/hf_tokenizer.h reads one); nmt-train's own
// vocabularies use the model's ids directly (SentencePieceIdMap).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/id_map.h"
#include "data/token_table.h"

namespace nmt::data {

/// The ids of one side of a Hugging Face tokenizer, over the SentencePiece model it was built
/// with.
class HfIdMap final : public IdMap {
 public:
  /// Maps `processor`'s pieces to `table`'s ids; throws DataError naming `name` when the
  /// table's special ids are not special or a language code is not among them.
  HfIdMap(TokenTable table, std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor,
          const std::string& name);

  /// The ids of text's pieces, without special tokens: a piece the table lacks is unk_id. For
  /// NLLB also a final ▁ when the line ends in whitespace, as transformers 5's tokenizer (a
  /// tokenizers BPE with the Metaspace pre-tokenizer) has it.
  std::vector<int32_t> encode(std::string_view text) const override;
  /// Text of ids as the tokenizer's decode(ids, skip_special_tokens=True) gives it: special
  /// ids are dropped; Marian and M2M100 decode the rest with the SentencePiece model and strip
  /// outer whitespace, NLLB joins them as tokenizers' Metaspace decoder does.
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t size() const override { return static_cast<int64_t>(table_.tokens.size()); }
  std::optional<int32_t> piece_id(std::string_view piece) const override { return token_id(piece); }
  /// The special ids (pad, eos, unk, language codes, ...).
  bool is_control(int32_t id) const override { return is_special(id); }
  const TokenTable* table() const override { return &table_; }
  LanguageCodePlacement placement() const override { return table_.placement; }

  /// The id of a token, or nullopt.
  std::optional<int32_t> token_id(std::string_view token) const;
  /// True for a special id (pad, eos, unk, language codes, ...): never produced from text.
  bool is_special(int32_t id) const {
    return id >= 0 && id < size() && special_[static_cast<size_t>(id)];
  }

 private:
  TokenTable table_;
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor_;
  std::unordered_map<std::string, int32_t> ids_by_token_;
  std::vector<int32_t> id_of_piece_;  ///< SentencePiece id -> table id (unk_id if absent)
  std::vector<bool> special_;         ///< by table id
};

}  // namespace nmt::data
