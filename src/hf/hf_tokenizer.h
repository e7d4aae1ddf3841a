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

#include "hf/hf_tokenizer_class.h"
#include "data/token_table.h"
#include "data/vocab.h"

namespace nmt::hf {

/// What load_hf_tokenizer read.
struct HfTokenizer {
  data::HfTokenizerKind kind = data::HfTokenizerKind::kMarian;
  /// src and tgt; joint when both sides serialize alike (one model and one id table).
  data::Vocabularies vocab;
};

/// Reads the tokenizer files of a Hugging Face model directory, of the class AutoTokenizer
/// would load (hf/hf_tokenizer_class.h; `model` is what config.json says). A side may have
/// fewer ids than its table's rows (`model.src_rows`, `model.tgt_rows`; 0: the tokenizer's):
/// NLLB-200 has 256206 rows for 256204 tokens, and the rows above get placeholder special
/// tokens, which text never produces and decode drops. Throws DataError naming the file and key
/// when one is missing, unreadable or not a regular file, of another type or tokenizer class,
/// or inconsistent (a special token absent from the ids, ids with gaps or past int32, more ids
/// than the side's rows).
HfTokenizer load_hf_tokenizer(const std::filesystem::path& dir, const HfTokenizerModel& model = {});

}  // namespace nmt::hf
