#pragma once
// Our vocabularies as Hugging Face tokenizer files, which transformers' AutoTokenizer loads with
// no code of ours (the inverse of hf/hf_tokenizer.h):
//
//   nmt-train's SentencePiece models   MarianTokenizer: source.spm, target.spm (the same model
//                                      when joint), vocab.json (piece -> our id: the model's
//                                      own ids), target_vocab.json and separate_vocabs when
//                                      not joint. Tags stay control symbols, so text never
//                                      gives one (a model with user-defined tags, from before
//                                      they were control symbols, is written retyped); a
//                                      language tag `<2de>` is the vocab.json token `>>de<<`,
//                                      which MarianTokenizer reads from the start of the text
//                                      (">>de<< Hello"), as OPUS-MT's multilingual models do.
//   an imported MarianTokenizer        its files again: the SentencePiece models and vocab.json
//                                      as imported.
//   an imported M2M100Tokenizer        sentencepiece.bpe.model, vocab.json (the ids before the
//                                      language codes) and language_codes.
//   an imported NllbTokenizer          sentencepiece.bpe.model and tokenizer_config.json with
//                                      the language codes in id order (extra_special_tokens),
//                                      from which transformers 5 builds the tokenizer with the
//                                      same ids (no tokenizer.json is written).
//
// MarianTokenizer appends </s> and maps each SentencePiece piece through vocab.json, which for
// text without special-token strings (`</s>`, `<unk>`, `<pad>`: the Python tokenizer cuts
// them out of the text, we never do) gives our ids exactly.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/vocab.h"

namespace nmt::hf {

/// The tokenizer files of `vocab` in `dir` (an existing folder): see above. `max_length` is
/// the tokenizer's model_max_length (the model's positions). Returns the names of the files
/// written. Throws DataError for a vocabulary it cannot express, naming it.
std::vector<std::string> write_hf_tokenizer(const data::Vocabularies& vocab,
                                            const std::filesystem::path& dir, int64_t max_length);

}  // namespace nmt::hf
