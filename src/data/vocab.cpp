#include "data/vocab.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include <fmt/ranges.h>

#include "data/corpus_set.h"
#include "data/hf_id_map.h"
#include "data/id_map.h"
#include "data/lang_tags.h"
#include "data/line_sample.h"
#include "data/spm_model_proto.h"
#include "data/spm_training_log.h"
#include "util/duration.h"
#include "util/error.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/timer.h"

// SentencePiece (0.1.97, Debian 12) logs "Running command: ..." at INFO before it reads
// --minloglevel from those arguments. Its setter is exported by libsentencepiece but missing
// from the installed headers.
namespace sentencepiece::logging {
void SetMinLogLevel(int v);
}  // namespace sentencepiece::logging

namespace nmt::data {
namespace {

/// FNV-1a 64 of bytes as 16 hex digits.
std::string hash_hex(const std::string& bytes) {
  Fnv1a64 hash;
  hash.update(bytes);
  return fmt::format("{:016x}", hash.digest());
}

/// Writes `bytes` to `file` through a temporary file and a rename, so that it is never seen
/// half written.
void write_atomically(const std::filesystem::path& file, const std::string& bytes) {
  const std::filesystem::path tmp =
      file.parent_path() / fmt::format(".{}.tmp-{}", file.filename().string(), ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    NMT_CHECK(out.good(), DataError, "{}: cannot write the SentencePiece model", tmp.string());
  }
  std::filesystem::rename(tmp, file);
}

/// The sample's lines for SentencePiece (its sentence-iterator input, not --input files:
/// SentencePiece reads those as bytes, so a gzip-compressed corpus gave a vocabulary of
/// compressed bytes, or none).
class SampleIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit SampleIterator(const std::vector<std::string>& lines) : lines_(lines) {}
  bool done() const override { return next_ >= lines_.size(); }
  const std::string& value() const override { return lines_[next_]; }
  sentencepiece::util::Status status() const override { return {}; }
  void Next() override { ++next_; }

 private:
  const std::vector<std::string>& lines_;
  size_t next_ = 0;
};

/// SentencePiece trains with this many threads on every machine and under every launcher: the
/// model file records the count, and the trainer's work split follows it, so a count taken
/// from the cores or the ranks gave another vocabulary (and other parameters) on another
/// machine or under torchrun instead of the built-in launcher. SentencePiece's default.
constexpr int kSentencePieceThreads = 16;

/// Trains one SentencePiece model on `inputs` into `model` (<name>.model, with the piece list
/// in <name>.vocab), atomically.
void train_model(const std::vector<std::filesystem::path>& inputs,
                 const std::filesystem::path& model, const DataOptions& options,
                 const VocabTrainingOptions& training) {
  std::filesystem::create_directories(model.parent_path());
  std::string input_list;
  for (const auto& input : inputs) input_list += (input_list.empty() ? "" : ",") + input.string();
  // The model comes back in memory (no --model_prefix): the model embeds its training
  // arguments, and the temporary file prefix among them made every training's file differ,
  // and with it the token-cache key and the checkpoints' vocabulary fingerprint.
  std::string args = fmt::format(
      "--vocab_size={} --model_type={} --character_coverage=1.0 "
      "--input_sentence_size={} --shuffle_input_sentence=true "
      "--pad_id={} --unk_id={} --bos_id={} --eos_id={} --num_threads={} --minloglevel=0",
      options.vocab_size, options.subword_model == SubwordModel::kBpe ? "bpe" : "unigram",
      options.spm_sample_lines, kPadId, kUnkId, kBosId, kEosId, kSentencePieceThreads);
  // Tags as control symbols: one piece each, inserted by id and never produced from text
  // (user-defined symbols, as before, are matched inside text: a corpus line with `<BT>` got
  // the tag). Only when some are needed, so a run without tags trains the same model (and
  // fingerprint) as before they existed.
  std::string tags;
  for (const std::string& tag : required_tags(options)) tags += (tags.empty() ? "" : ",") + tag;
  if (!tags.empty()) args += " --control_symbols=" + tags;
  log::info("data", "training a {}-piece SentencePiece {} model on {}", options.vocab_size,
            options.subword_model == SubwordModel::kBpe ? "BPE" : "unigram", input_list);
  // The sample is drawn here, in one pass over the files read side by side (line_sample.h),
  // and SentencePiece gets only the sample: drawing it itself, SentencePiece read every line
  // of the corpus through one iterator, file after file (41 s of 166 at 20M pairs), and the
  // seed did not change its draw. It gets at most spm_sample_lines lines now, so it samples no
  // further and keeps their order: a corpus below that trains the vocabulary it trained before.
  const LineSample sample =
      sample_lines(inputs, {options.spm_sample_lines, training.seed, std::max(1, training.threads),
                            "vocabulary: sampling sentences"});
  log::info("data", "vocabulary: sampled {} of {} sentences in {}", sample.lines.size(),
            sample.lines_read, format_duration(sample.seconds));
  sentencepiece::SetRandomGeneratorSeed(training.seed);  // for any draw of its own
  // Its log (std::cerr) becomes progress lines while it trains (spm_training_log.h).
  SpmTrainingLog spm_log(options.vocab_size);
  sentencepiece::logging::SetMinLogLevel(0);  // INFO, like --minloglevel=0 above
  std::string serialized;
  // The lines come from the iterator, not --input (SentencePiece takes one or the other), so
  // the model does not record the input paths: the same text gives the same model from any
  // path, plain or compressed.
  SampleIterator lines(sample.lines);
  const auto start = std::chrono::steady_clock::now();
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &lines, &serialized);
  sentencepiece::logging::SetMinLogLevel(2);  // errors only again, for encoding
  log::info("data", "vocabulary: SentencePiece done in {}", format_duration(seconds_since(start)));
  NMT_CHECK(status.ok() && !serialized.empty(), DataError,
            "training SentencePiece on {} failed: {}", input_list, status.ToString());
  // The piece list for people, as SentencePiece writes it: piece, tab, score.
  sentencepiece::SentencePieceProcessor processor;
  NMT_CHECK(processor.LoadFromSerializedProto(serialized).ok(), DataError,
            "training SentencePiece on {} gave a model that does not load", input_list);
  std::ostringstream pieces;
  for (int id = 0; id < processor.GetPieceSize(); ++id)
    pieces << processor.IdToPiece(id) << '\t' << processor.GetScore(id) << '\n';
  write_atomically(std::filesystem::path(model).replace_extension(".vocab"), pieces.str());
  write_atomically(model, serialized);
}

}  // namespace

Vocab Vocab::load(const std::filesystem::path& model) {
  std::ifstream in(model, std::ios::binary);
  NMT_CHECK(in.good(), DataError, "{}: cannot load SentencePiece model: cannot read the file",
            model.string());
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return from_serialized(bytes, model.string());
}

Vocab Vocab::from_hf(const TokenTable& table, const std::string& spm_bytes,
                     const std::string& name) {
  return from_serialized(serialize_hf_vocab(table, spm_bytes), name);
}

Vocab Vocab::from_serialized(const std::string& bytes, const std::string& name) {
  if (is_serialized_hf_vocab(bytes)) {
    // An imported vocabulary: its ids are the tokenizer's; no tags to retype (its language
    // codes are special tokens, which SentencePiece never produces from text).
    ParsedHfVocab parsed = parse_hf_vocab(bytes, name);
    auto processor = std::make_shared<sentencepiece::SentencePieceProcessor>();
    const auto status = processor->LoadFromSerializedProto(parsed.spm_bytes);
    NMT_CHECK(status.ok(), DataError,
              "{}: cannot load the SentencePiece model of the Hugging Face vocabulary: {}", name,
              status.ToString());
    Vocab vocab;
    auto ids = std::make_shared<const HfIdMap>(std::move(parsed.table), std::move(processor), name);
    vocab.fingerprint_ = hash_hex(bytes);  // the whole table: ids and model
    vocab.encoding_fingerprint_ = vocab.fingerprint_;
    const TokenTable& table = *ids->table();
    vocab.pad_id_ = table.pad_id;
    // bos: the tokenizer's <s> (M2M100, NLLB), which search never generates; Marian has none,
    // and pad stands in. The decoder's first input is the model's (model.decoder_start).
    const std::optional<int32_t> bos = ids->token_id("<s>");
    vocab.bos_id_ = bos && ids->is_special(*bos) ? *bos : table.pad_id;
    vocab.eos_id_ = table.eos_id;
    vocab.unk_id_ = table.unk_id;
    vocab.ids_ = std::move(ids);
    vocab.bytes_ = std::make_shared<const std::string>(bytes);
    vocab.model_path_ = name;
    return vocab;
  }
  auto processor = std::make_shared<sentencepiece::SentencePieceProcessor>();
  const auto status = processor->LoadFromSerializedProto(bytes);
  NMT_CHECK(status.ok(), DataError, "{}: cannot load SentencePiece model: {}", name,
            status.ToString());
  Vocab vocab;
  vocab.fingerprint_ = hash_hex(bytes);
  vocab.encoding_fingerprint_ = vocab.fingerprint_;
  // A model from before tags were control symbols has them as user-defined symbols, which
  // SentencePiece matches inside text. Retyped as control symbols they keep their ids (the
  // checkpoint's embeddings stay right) and text without the tag strings encodes exactly as
  // before (a user-defined piece only ever matches its own string), while the text `<BT>`
  // becomes its characters' pieces. Chosen over encoding the text in segments cut around each
  // tag string (each cut adds a word-start piece where the text has no space) or mapping the
  // string to piece ids of our own choosing: retyping gives what SentencePiece itself makes of
  // the text once the tags cannot match, as a model nmt-train trains now (tags declared
  // control symbols) does.
  RetypedModel retyped = retype_pieces(bytes, PieceType::kUserDefined, PieceType::kControl,
                                       is_tag_piece, name);
  if (!retyped.retyped.empty()) {
    const auto again = processor->LoadFromSerializedProto(retyped.bytes);
    NMT_CHECK(again.ok(), DataError, "{}: cannot load SentencePiece model with {} as control "
              "symbols: {}", name, fmt::join(retyped.retyped, ", "), again.ToString());
    vocab.encoding_fingerprint_ = hash_hex(retyped.bytes);
    vocab.retyped_tags_ = std::move(retyped.retyped);
  }
  vocab.pad_id_ = processor->pad_id();
  vocab.bos_id_ = processor->bos_id();
  vocab.eos_id_ = processor->eos_id();
  vocab.unk_id_ = processor->unk_id();
  NMT_CHECK(vocab.pad_id_ >= 0 && vocab.bos_id_ >= 0 && vocab.eos_id_ >= 0, DataError,
            "{}: the SentencePiece model needs pad, bos and eos pieces (found pad_id {}, bos_id "
            "{}, eos_id {}); train it with --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3",
            name, vocab.pad_id_, vocab.bos_id_, vocab.eos_id_);
  vocab.ids_ = std::make_shared<const SentencePieceIdMap>(std::move(processor));
  vocab.bytes_ = std::make_shared<const std::string>(bytes);
  vocab.model_path_ = name;
  return vocab;
}

// A default-constructed Vocab (Vocabularies' members before they are loaded) has no table and
// the default placement.
const TokenTable* Vocab::hf_table() const { return ids_ ? ids_->table() : nullptr; }

LanguageCodePlacement Vocab::language_placement() const {
  return ids_ ? ids_->placement() : LanguageCodePlacement::kTargetInSource;
}

std::vector<int32_t> Vocab::encode(std::string_view text) const { return ids_->encode(text); }

std::string Vocab::decode(const std::vector<int32_t>& ids) const { return ids_->decode(ids); }

int64_t Vocab::size() const { return ids_->size(); }

bool Vocab::is_control(int32_t id) const { return ids_->is_control(id); }

std::optional<int32_t> Vocab::piece_id(std::string_view piece) const {
  return ids_->piece_id(piece);
}

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
  // Trained on every training corpus (data.train), source files before target files.
  std::vector<std::filesystem::path> sources, targets;
  for (const CorpusOptions& corpus : training_corpora(options)) {
    sources.emplace_back(corpus.src);
    targets.emplace_back(corpus.tgt);
  }
  if (options.joint_vocab) {
    std::vector<std::filesystem::path> both = sources;
    both.insert(both.end(), targets.begin(), targets.end());
    v.src = ensure(dir / "joint.model", both);
    v.tgt = v.src;
  } else {
    v.src = ensure(dir / "src.model", sources);
    v.tgt = ensure(dir / "tgt.model", targets);
  }
  return v;
}

std::string vocabularies_fingerprint(const Vocabularies& vocab) {
  return vocab.joint ? vocab.src.fingerprint()
                     : vocab.src.fingerprint() + "+" + vocab.tgt.fingerprint();
}

}  // namespace nmt::data
