#include "data/vocab.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <fstream>

#include "data/file_hash.h"
#include "util/error.h"
#include "util/log.h"

namespace nmt::data {
namespace {

/// Trains one SentencePiece model on `inputs` into `model` (prefix.model), atomically.
void train_model(const std::vector<std::filesystem::path>& inputs,
                 const std::filesystem::path& model, const DataOptions& options,
                 const VocabTrainingOptions& training) {
  std::filesystem::create_directories(model.parent_path());
  const std::filesystem::path tmp_prefix =
      model.parent_path() / fmt::format(".{}.tmp-{}", model.stem().string(), ::getpid());
  std::string input_list;
  for (const auto& input : inputs) input_list += (input_list.empty() ? "" : ",") + input.string();
  const std::string args = fmt::format(
      "--input={} --model_prefix={} --vocab_size={} --model_type={} --character_coverage=1.0 "
      "--input_sentence_size={} --shuffle_input_sentence=true "
      "--pad_id={} --unk_id={} --bos_id={} --eos_id={} --num_threads={} --minloglevel=2",
      input_list, tmp_prefix.string(), options.vocab_size,
      options.subword_model == SubwordModel::kBpe ? "bpe" : "unigram", options.spm_sample_lines,
      kPadId, kUnkId, kBosId, kEosId, std::max(1, training.threads));
  log::info("data", "training a {}-piece SentencePiece {} model on {}", options.vocab_size,
            options.subword_model == SubwordModel::kBpe ? "BPE" : "unigram", input_list);
  // The seed makes line sampling (corpora above spm_sample_lines) repeatable.
  sentencepiece::SetRandomGeneratorSeed(training.seed);
  const auto status = sentencepiece::SentencePieceTrainer::Train(args);
  NMT_CHECK(status.ok(), DataError, "training SentencePiece on {} failed: {}", input_list,
            status.ToString());
  std::filesystem::rename(tmp_prefix.string() + ".model", model);
  std::error_code ignored;
  std::filesystem::rename(tmp_prefix.string() + ".vocab",
                          std::filesystem::path(model).replace_extension(".vocab"), ignored);
}

}  // namespace

Vocab Vocab::load(const std::filesystem::path& model) {
  std::ifstream in(model, std::ios::binary);
  NMT_CHECK(in.good(), DataError, "{}: cannot load SentencePiece model: cannot read the file",
            model.string());
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return from_serialized(bytes, model.string());
}

Vocab Vocab::from_serialized(const std::string& bytes, const std::string& name) {
  auto processor = std::make_shared<sentencepiece::SentencePieceProcessor>();
  const auto status = processor->LoadFromSerializedProto(bytes);
  NMT_CHECK(status.ok(), DataError, "{}: cannot load SentencePiece model: {}", name,
            status.ToString());
  Vocab vocab;
  vocab.pad_id_ = processor->pad_id();
  vocab.bos_id_ = processor->bos_id();
  vocab.eos_id_ = processor->eos_id();
  vocab.unk_id_ = processor->unk_id();
  NMT_CHECK(vocab.pad_id_ >= 0 && vocab.bos_id_ >= 0 && vocab.eos_id_ >= 0, DataError,
            "{}: the SentencePiece model needs pad, bos and eos pieces (found pad_id {}, bos_id "
            "{}, eos_id {}); train it with --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3",
            name, vocab.pad_id_, vocab.bos_id_, vocab.eos_id_);
  vocab.processor_ = std::move(processor);
  vocab.model_path_ = name;
  Fnv1a64 hash;
  hash.update(bytes);
  vocab.fingerprint_ = fmt::format("{:016x}", hash.digest());
  return vocab;
}

std::vector<int32_t> Vocab::encode(std::string_view text) const {
  std::vector<int> ids;
  processor_->Encode(text, &ids);
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string Vocab::decode(const std::vector<int32_t>& ids) const {
  std::vector<int> kept;
  kept.reserve(ids.size());
  for (int32_t id : ids)
    if (id != pad_id_ && id != bos_id_ && id != eos_id_) kept.push_back(id);
  std::string text;
  processor_->Decode(kept, &text);
  return text;
}

int64_t Vocab::size() const { return processor_->GetPieceSize(); }

Vocabularies prepare_vocabularies(const DataOptions& options, const std::filesystem::path& run_dir,
                                  const VocabTrainingOptions& training) {
  Vocabularies v;
  v.joint = options.joint_vocab;
  if (!options.spm_model.empty()) {
    v.src = Vocab::load(options.spm_model);
    v.tgt = v.src;
    v.joint = true;
    return v;
  }
  const std::filesystem::path dir = run_dir / "vocab";
  auto ensure = [&](const std::filesystem::path& model,
                    const std::vector<std::filesystem::path>& inputs) {
    if (!std::filesystem::exists(model)) {
      train_model(inputs, model, options, training);
      v.trained = true;
    } else {
      log::info("data", "reusing vocabulary {}", model.string());
    }
    return Vocab::load(model);
  };
  if (options.joint_vocab) {
    v.src = ensure(dir / "joint.model", {options.train_src, options.train_tgt});
    v.tgt = v.src;
  } else {
    v.src = ensure(dir / "src.model", {options.train_src});
    v.tgt = ensure(dir / "tgt.model", {options.train_tgt});
  }
  return v;
}

}  // namespace nmt::data
