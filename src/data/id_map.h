#pragma once
// How a vocabulary's text becomes ids and back: an IdMap over one SentencePiece model. Vocab
// (data/vocab.h) holds one and forwards to it, whichever kind it is:
//
//   SentencePieceIdMap  nmt-train's own vocabularies: the model's ids themselves (the identity)
//   HfIdMap             one imported from Hugging Face: a token table's ids (data/hf_id_map.h)

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/token_table.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace nmt::data {

/// Text to ids and back over one SentencePiece model.
class IdMap {
 public:
  virtual ~IdMap() = default;

  /// Pieces of text as ids, without bos/eos; never a special (control) id.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  /// Detokenized text of ids, special ids dropped (as Vocab::decode says which).
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual int64_t size() const = 0;
  /// The id of a piece (token), or nullopt.
  virtual std::optional<int32_t> piece_id(std::string_view piece) const = 0;
  /// True for an id inserted by id only, never encoded from text.
  virtual bool is_control(int32_t id) const = 0;
  /// The token table of an imported vocabulary; nullptr for the model's own ids.
  virtual const TokenTable* table() const = 0;
  /// Where language codes go.
  virtual LanguageCodePlacement placement() const = 0;
};

/// A SentencePiece model's own ids (nmt-train's vocabularies): encode and decode are the
/// model's; decode drops its pad, bos and eos.
class SentencePieceIdMap final : public IdMap {
 public:
  explicit SentencePieceIdMap(
      std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t size() const override;
  std::optional<int32_t> piece_id(std::string_view piece) const override;
  bool is_control(int32_t id) const override;
  const TokenTable* table() const override { return nullptr; }
  /// The target's tag first in the source (`<2xx>`).
  LanguageCodePlacement placement() const override {
    return LanguageCodePlacement::kTargetInSource;
  }

 private:
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace nmt::data
