#pragma once
// The file names of transformers' tokenizer classes, for the reader (hf/hf_tokenizer.h) and
// the writer (hf/hf_tokenizer_writer.h).

namespace nmt::hf::hf_tokenizer_file {

inline constexpr const char* kTokenizerConfig = "tokenizer_config.json";  ///< every class
inline constexpr const char* kVocabJson = "vocab.json";  ///< Marian (source side), M2M100
inline constexpr const char* kTargetVocabJson = "target_vocab.json";  ///< Marian, separate_vocabs
inline constexpr const char* kMarianSource = "source.spm";            ///< Marian's source model
inline constexpr const char* kMarianTarget = "target.spm";            ///< Marian's target model
inline constexpr const char* kBpeModel = "sentencepiece.bpe.model";   ///< M2M100, NLLB
inline constexpr const char* kTokenizerJson = "tokenizer.json";       ///< NLLB (tokenizers)

}  // namespace nmt::hf::hf_tokenizer_file
