#pragma once
// A run directory of tiny random models that the Translator tests load: checkpoints laid out
// as nmt-train saves them, with a small SentencePiece model trained on the first lines of the
// shipped corpus. Shared by test_translator.cpp and test_ensemble.cpp.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <ATen/ATen.h>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/tensor_groups.h"
#include "config/run_config.h"
#include "data/corpus_reader.h"
#include "data/vocab.h"
#include "model/transformer.h"
#include "spm_fixture.h"
#include "test_support.h"

namespace nmt::test {

/// The vocabulary of a TinyRun: without tags, or a multilingual model's (tags <2de> and <2en>)
/// as nmt-train trains it now (control symbols) or trained it before (user-defined symbols).
enum class TinyVocab { kPlain, kControlTags, kUserDefinedTags };

/// A run directory with checkpoints of a tiny random model and a small SentencePiece model
/// trained on the first lines of the shipped corpus, laid out as nmt-train saves them.
class TinyRun {
 public:
  /// With vocab_size pieces (another size: another vocabulary from the same text).
  explicit TinyRun(TinyVocab kind = TinyVocab::kPlain, int64_t vocab_size = 300) : kind_(kind) {
    const std::filesystem::path corpus = dir_.path() / "corpus.txt";
    {
      nmt::data::LineReader en(std::string(NMT_SOURCE_DIR) + "/data/ddtp.en-de.train.en.gz");
      std::ofstream out(corpus);
      std::string line;
      for (int i = 0; i < 2000 && en.next(&line); ++i) out << line << '\n';
    }
    nmt::data::DataOptions data;
    data.train_src = data.train_tgt = corpus.string();
    data.vocab_size = vocab_size;
    if (kind == TinyVocab::kControlTags) {
      nmt::data::CorpusOptions en_de{"en-de", corpus.string(), corpus.string()};
      en_de.src_lang = "en", en_de.tgt_lang = "de";
      nmt::data::CorpusOptions de_en = en_de;
      de_en.name = "de-en", de_en.src_lang = "de", de_en.tgt_lang = "en";
      data.train = {en_de, de_en};
      data.lang_tags = nmt::data::LangTags::kTarget;
    }
    vocab_model_ = kind == TinyVocab::kUserDefinedTags
                       ? nmt::test::train_user_defined_tag_vocab(corpus, dir_.path() / "legacy",
                                                                 {"<2de>", "<2en>"}, vocab_size)
                       : nmt::data::prepare_vocabularies(data, dir_.path(), {}).src.model_path();
    const auto vocab = nmt::data::Vocab::load(vocab_model_);
    vocab_size_ = vocab.size();
    std::ifstream in(vocab_model_, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    vocab_bytes_ = at::empty({int64_t(bytes.size())}, at::kByte);
    std::memcpy(vocab_bytes_.data_ptr<uint8_t>(), bytes.data(), bytes.size());

    config_.model.encoder_layers = 1;
    config_.model.decoder_layers = 1;
    config_.model.d_model = 32;
    config_.model.heads = 4;
    config_.model.ffn_dim = 64;
    config_.model.max_positions = 64;
    std::filesystem::create_directories(dir_.path() / "checkpoints");
  }

  /// Saves a checkpoint of a model with weights from `seed` at `step`.
  std::filesystem::path save(int64_t step, uint64_t seed, const std::string& valid_loss = "") {
    at::manual_seed(seed);
    nmt::model::Transformer model(config_.model, vocab_size_, vocab_size_, 0);
    nmt::checkpoint::CheckpointData data;
    using nmt::checkpoint::TensorGroup;
    for (const auto& item : model->named_parameters())
      nmt::checkpoint::add_tensor(data, TensorGroup::kModel, item.key(), item.value().detach());
    nmt::checkpoint::add_tensor(data, TensorGroup::kVocabulary,
                                nmt::checkpoint::vocabulary_file::kSource, vocab_bytes_);
    data.metadata = {{"step", std::to_string(step)},
                     {"config", nmt::config::to_yaml(config_)},
                     {"vocab_joint", "true"}};
    if (kind_ != TinyVocab::kPlain) {
      data.metadata["languages"] = "de,en";
      data.metadata["lang_tags"] = "target";
    }
    if (!valid_loss.empty()) data.metadata["selection"] = valid_loss;
    char name[64];
    std::snprintf(name, sizeof(name), "checkpoint-%08lld.safetensors",
                  static_cast<long long>(step));
    const auto file = dir_.path() / "checkpoints" / name;
    nmt::checkpoint::save_checkpoint(file, data);
    return file;
  }

  const std::filesystem::path& path() const { return dir_.path(); }
  /// The shape of the models save() writes from now on (1 layer each side, d_model 32).
  nmt::model::ModelOptions& model_options() { return config_.model; }
  /// The SentencePiece model file its checkpoints hold.
  const std::filesystem::path& vocab_model() const { return vocab_model_; }

 private:
  nmt::test::TempDir dir_;
  TinyVocab kind_;
  std::filesystem::path vocab_model_;
  nmt::config::RunConfig config_;
  int64_t vocab_size_ = 0;
  at::Tensor vocab_bytes_;
};

}  // namespace nmt::test
