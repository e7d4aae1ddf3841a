#pragma once
// SentencePiece models the C++ tests train themselves with SentencePiece's own trainer: one
// helper, train_spm, that every test and benchmark calls with the arguments that make its
// kind of model (nmt-train's special ids, Hugging Face's defaults, symbols), and the legacy
// vocabulary below.
//
// train_user_defined_tag_vocab: a model as nmt-train trained one before tags became control
// symbols: the tags declared user-defined symbols, which SentencePiece matches inside text (so a
// line with the text `<BT>` was encoded as the tag), trained with the arguments nmt-train passed
// then, for the tests that check such a model (kept in old run directories and checkpoints)
// still loads, keeps its ids, and no longer lets text make a tag.

#include <sentencepiece_trainer.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace nmt::test {

/// nmt-train's special ids (pad 0, unk 1, bos 2, eos 3), as trainer arguments.
inline const std::string kOwnSpecialIds = " --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3";

/// Trains `<prefix>.model` on the lines of `corpus`: `vocab_size` pieces, every character
/// covered, one thread, quiet; `extra` adds trainer arguments (" --model_type=bpe",
/// kOwnSpecialIds, symbols). Without special ids it has SentencePiece's defaults (<unk> 0,
/// <s> 1, </s> 2), as Hugging Face's models have. Returns the model's path.
inline std::filesystem::path train_spm(const std::filesystem::path& corpus,
                                       const std::filesystem::path& prefix, int vocab_size,
                                       const std::string& extra = "") {
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + corpus.string() + " --model_prefix=" + prefix.string() +
      " --vocab_size=" + std::to_string(vocab_size) +
      " --character_coverage=1.0 --num_threads=1 --minloglevel=2" + extra);
  if (!status.ok())
    throw std::runtime_error("training SentencePiece " + prefix.string() + ": " +
                             status.ToString());
  return prefix.string() + ".model";
}

/// Trains `<prefix>.model` on the lines of `corpus` with `tags` as user-defined symbols and
/// nmt-train's special ids (pad 0, unk 1, bos 2, eos 3); returns the model's path.
inline std::filesystem::path train_user_defined_tag_vocab(const std::filesystem::path& corpus,
                                                          const std::filesystem::path& prefix,
                                                          const std::vector<std::string>& tags,
                                                          int vocab_size) {
  std::string symbols;
  for (const std::string& tag : tags) symbols += (symbols.empty() ? "" : ",") + tag;
  return train_spm(corpus, prefix, vocab_size,
                   " --model_type=unigram" + kOwnSpecialIds + " --user_defined_symbols=" + symbols);
}

}  // namespace nmt::test
