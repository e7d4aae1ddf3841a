#pragma once
// The ids of an imported Hugging Face tokenizer (hf/hf_tokenizer.h): the token each id
// stands for, which ids are special, which are language codes, and where those codes go; and
// the bytes that keep one side's table with its SentencePiece model (a Vocab's serialized
// form, stored in checkpoints and run directories as nmt-train's own .model files are).
//
// Serialized form, readable from any language without a protobuf or CBOR library:
//   line 1   kHfVocabMagic
//   line 2   the table as compact JSON (keys: hf_vocab_key below)
//   the rest the SentencePiece model's bytes
// A SentencePiece model's bytes start with 0x0a (field 1, a piece), never with the magic, so
// Vocab::from_serialized tells the two apart by the first line.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nmt::data {

/// The Hugging Face tokenizer classes whose ids Vocab reproduces.
enum class HfTokenizerKind {
  kMarian,  ///< MarianTokenizer: source.spm / target.spm, ids through vocab.json
  kM2M100,  ///< M2M100Tokenizer: sentencepiece.bpe.model, ids through vocab.json, `__xx__`
  kNllb,    ///< NllbTokenizer: sentencepiece.bpe.model, fairseq's ids (+1), `xxx_Xxxx`
};

/// Where the language codes of a multilingual model go.
enum class LanguageCodePlacement {
  /// The target language's code first in the source (nmt-train's `<2xx>`, Marian's `>>xxx<<`).
  kTargetInSource,
  /// The source language's code first in the source, the target language's first in the
  /// target, which the decoder must be forced to produce first (M2M100, NLLB).
  kSourceAndTarget,
};

/// The name a serialized table gives `kind` ("marian", "m2m100", "nllb").
std::string_view hf_tokenizer_name(HfTokenizerKind kind);

/// One side (source or target) of a Hugging Face tokenizer's id mapping.
struct TokenTable {
  HfTokenizerKind kind = HfTokenizerKind::kMarian;
  std::vector<std::string> tokens;    ///< the token of each id (the model's vocabulary)
  std::vector<int32_t> special_ids;   ///< never from text, dropped by decode (skip_special_tokens)
  std::vector<int32_t> language_ids;  ///< the language-code tokens (a subset of special_ids)
  int32_t pad_id = -1;
  int32_t unk_id = -1;
  int32_t eos_id = -1;
  /// The decoder's first input as the tokenizer class has it (checked against config.json's
  /// decoder_start_token_id on import; the model option model.decoder_start decides).
  int32_t decoder_start_id = -1;
  /// A piece the SentencePiece model does not know is looked up by its text among `tokens`
  /// (the tokenizer looks every piece up in vocab.json); false: it is always unk_id (NLLB's
  /// fairseq mapping goes through the SentencePiece id).
  bool unknown_by_text = true;
  LanguageCodePlacement placement = LanguageCodePlacement::kTargetInSource;
};

/// The first line of a serialized Hugging Face vocabulary.
inline constexpr std::string_view kHfVocabMagic = "nmt-hf-vocab 1";

/// True when `bytes` are serialize_hf_vocab's (not a SentencePiece model).
bool is_serialized_hf_vocab(std::string_view bytes);

/// `table` and the SentencePiece model `spm_bytes` as one byte string (format above).
std::string serialize_hf_vocab(const TokenTable& table, const std::string& spm_bytes);

/// What serialize_hf_vocab wrote.
struct ParsedHfVocab {
  TokenTable table;
  std::string spm_bytes;
};

/// Parses serialize_hf_vocab's bytes; throws DataError naming `name` and the key when a field
/// is missing, of the wrong type, or an id is outside the table.
ParsedHfVocab parse_hf_vocab(std::string_view bytes, const std::string& name);

}  // namespace nmt::data
