#pragma once
// A SentencePiece model as nmt-train trained one before tags became control symbols: the tags
// declared user-defined symbols, which SentencePiece matches inside text (so a line with the
// text `<BT>` was encoded as the tag). Trained here with SentencePiece's own trainer and the
// arguments nmt-train passed then, for the tests that check such a model (kept in old run
// directories and checkpoints) still loads, keeps its ids, and no longer lets text make a tag.

#include <sentencepiece_trainer.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace nmt::test {

/// Trains `<prefix>.model` on the lines of `corpus` with `tags` as user-defined symbols and
/// nmt-train's special ids (pad 0, unk 1, bos 2, eos 3); returns the model's path.
inline std::filesystem::path train_user_defined_tag_vocab(const std::filesystem::path& corpus,
                                                          const std::filesystem::path& prefix,
                                                          const std::vector<std::string>& tags,
                                                          int vocab_size) {
  std::string symbols;
  for (const std::string& tag : tags) symbols += (symbols.empty() ? "" : ",") + tag;
  const std::string args =
      "--input=" + corpus.string() + " --model_prefix=" + prefix.string() +
      " --vocab_size=" + std::to_string(vocab_size) +
      " --model_type=unigram --character_coverage=1.0 --pad_id=0 --unk_id=1 --bos_id=2"
      " --eos_id=3 --num_threads=1 --minloglevel=2 --user_defined_symbols=" +
      symbols;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args);
  if (!status.ok())
    throw std::runtime_error("training the legacy vocabulary: " + status.ToString());
  return prefix.string() + ".model";
}

}  // namespace nmt::test
