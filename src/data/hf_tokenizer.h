#pragma once
// A Hugging Face tokenizer directory, as save_pretrained writes it, read into nmt-train's
// vocabularies: each side a SentencePiece model with the tokenizer's ids (data/hf_id_map.h),
// which Vocab serializes (data/token_table.h) for checkpoints and run directories.
//
//   MarianTokenizer  source.spm (source side), target.spm (target side), ids through
//                    vocab.json (target_vocab.json with separate_vocabs); `>>xxx<<` language
//                    codes go first in the source;
//   M2M100Tokenizer  sentencepiece.bpe.model, ids through vocab.json, `__xx__` codes after it;
//   NllbTokenizer    sentencepiece.bpe.model with fairseq's ids (<s> 0, <pad> 1, </s> 2,
//                    <unk> 3, then the model's pieces one up), `xxx_Xxxx` codes and <mask>
//                    after them. M2M100 and NLLB put the source language's code first in the
//                    source and the target language's first in the target.
//
// The special tokens' ids come from tokenizer_config.json (added_tokens_decoder, and the
// pad/unk/eos/bos token names; a Marian vocabulary's <s>, which those of models trained here
// have, is their bos), M2M100's codes from its language_codes list (they follow vocab.json),
// NLLB's from tokenizer.json, which an NLLB directory must have (added_tokens; its model.vocab
// is checked against the SentencePiece model). Encoding and decoding match transformers 5.24's
// AutoTokenizer (tests/scripts/test_hf_tokenizer.py) for text without special-token strings:
// special tokens (language codes too) are never produced from text here, they are inserted by id as
// nmt-train's own tags are, where the Python tokenizers match `</s>` or `<unk>` inside a line
// and Marian's takes a leading `>>xxx<<` of the text as the code.

#include <filesystem>

#include "data/token_table.h"
#include "data/vocab.h"

namespace nmt::data {

/// What load_hf_tokenizer read.
struct HfTokenizer {
  HfTokenizerKind kind = HfTokenizerKind::kMarian;
  /// src and tgt; joint when both sides serialize alike (one model and one id table).
  Vocabularies vocab;
};

/// Reads the tokenizer files of a Hugging Face model directory. `model_vocab_size` (the
/// model's config.json vocab_size; 0: the tokenizer's) may exceed the tokenizer's ids (NLLB-200:
/// 256206 rows for 256204 tokens): the rows above get placeholder special tokens, which text
/// never produces and decode drops. Throws DataError naming the file and key when one is
/// missing, unreadable, of another type or tokenizer class, or inconsistent (a special token
/// absent from the ids, ids with gaps or past int32, more ids than `model_vocab_size`).
HfTokenizer load_hf_tokenizer(const std::filesystem::path& dir, int64_t model_vocab_size = 0);

}  // namespace nmt::data
