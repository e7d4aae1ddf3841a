#pragma once
// SentencePiece models for the Hugging Face tokenizer tests (test_hf_tokenizer.cpp,
// test_hf_tokenizer_class.cpp): trained on the first lines of a shipped file.

#include <sentencepiece_processor.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "data/data_fixture.h"
#include "spm_fixture.h"

namespace nmt::test {

/// A SentencePiece model with SentencePiece's default specials (<unk> 0, <s> 1, </s> 2), as
/// Hugging Face's models have, trained on the first lines of a shipped file; dir/name.model.
inline std::string train_model(const TempDir& dir, const std::string& shipped,
                               const std::string& name, const std::string& type,
                               int vocab_size = 300) {
  const auto corpus = head_of(dir, shipped, name + ".txt", 2000);
  return read_file(train_spm(corpus, dir.path() / name, vocab_size, " --model_type=" + type));
}

/// The ordinary pieces of a model, in id order.
inline std::vector<std::string> pieces_of(const std::string& model) {
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.LoadFromSerializedProto(model).ok()) throw std::runtime_error("bad SentencePiece model");
  std::vector<std::string> pieces;
  for (int i = 0; i < sp.GetPieceSize(); ++i)
    if (!sp.IsUnknown(i) && !sp.IsControl(i)) pieces.push_back(sp.IdToPiece(i));
  return pieces;
}

}  // namespace nmt::test
