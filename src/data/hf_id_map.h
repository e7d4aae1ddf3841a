#pragma once
// Text to ids and back as a Hugging Face tokenizer does it, over one SentencePiece model and
// a TokenTable (data/token_table.h): the model cuts text into pieces, the table gives each
// piece its id (vocab.json, or fairseq's SentencePiece id + 1). Vocab (data/vocab.h) holds one
// for a vocabulary imported from Hugging Face; nmt-train's own vocabularies use the model's
// ids directly.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/token_table.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace nmt::data {

/// The ids of one side of a Hugging Face tokenizer, over the SentencePiece model it was built
/// with (the processor is passed to each call: Vocab owns it).
class HfIdMap {
 public:
  /// Maps `processor`'s pieces to `table`'s ids; throws DataError naming `name` when the
  /// table's special ids are not special or a language code is not among them.
  HfIdMap(TokenTable table, const sentencepiece::SentencePieceProcessor& processor,
          const std::string& name);

  /// The ids of text's pieces, without special tokens: a piece the table lacks is unk_id. For
  /// NLLB also a final ▁ when the line ends in whitespace, as transformers 5's tokenizer (a
  /// tokenizers BPE with the Metaspace pre-tokenizer) has it.
  std::vector<int32_t> encode(const sentencepiece::SentencePieceProcessor& processor,
                              std::string_view text) const;
  /// Text of ids as the tokenizer's decode(ids, skip_special_tokens=True) gives it: special
  /// ids are dropped; Marian and M2M100 decode the rest with the SentencePiece model and strip
  /// outer whitespace, NLLB joins them as tokenizers' Metaspace decoder does.
  std::string decode(const sentencepiece::SentencePieceProcessor& processor,
                     const std::vector<int32_t>& ids) const;

  const TokenTable& table() const { return table_; }
  int64_t size() const { return static_cast<int64_t>(table_.tokens.size()); }
  /// The id of a token, or nullopt.
  std::optional<int32_t> token_id(std::string_view token) const;
  /// True for a special id (pad, eos, unk, language codes, ...): never produced from text.
  bool is_special(int32_t id) const {
    return id >= 0 && id < size() && special_[static_cast<size_t>(id)];
  }

 private:
  TokenTable table_;
  std::unordered_map<std::string, int32_t> ids_by_token_;
  std::vector<int32_t> id_of_piece_;  ///< SentencePiece id -> table id (unk_id if absent)
  std::vector<bool> special_;         ///< by table id
};

}  // namespace nmt::data
