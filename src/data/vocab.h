#pragma once
// Subword vocabularies through SentencePiece's C++ API: load a model, or train one on the
// training data and keep it in the run directory for every later run and resume. A
// vocabulary imported from a Hugging Face tokenizer (hf/hf_tokenizer.h) is a SentencePiece
// model with the tokenizer's ids (data/hf_id_map.h), serialized as data/token_table.h says and
// loaded by the same calls, so checkpoints, run directories and the token cache keep it as
// they keep ours. A Vocab holds one IdMap (data/id_map.h), the model's own ids or the
// tokenizer's, and forwards encoding, decoding and lookups to it.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/data_options.h"
#include "data/token_table.h"

namespace nmt::data {

class IdMap;

/// Special ids of every vocabulary nmt-train trains (a given model must define pad, bos, eos).
constexpr int32_t kPadId = 0;
constexpr int32_t kUnkId = 1;
constexpr int32_t kBosId = 2;
constexpr int32_t kEosId = 3;

/// A loaded SentencePiece model. Its tags (data/lang_tags.h) are control symbols, which text
/// never encodes to: a model that declares them user-defined symbols (trained by nmt-train
/// before tags became control symbols) is loaded with them retyped as control symbols
/// (data/spm_model_proto.h), keeping its ids and the encoding of text without tag strings.
class Vocab {
 public:
  /// Loads a model; throws DataError when it cannot be read or lacks pad, bos or eos pieces.
  static Vocab load(const std::filesystem::path& model);
  /// Loads a model from the bytes of a .model file (e.g. kept in a checkpoint) or of an
  /// imported Hugging Face vocabulary (serialized()); `name` says where they came from, for
  /// messages and model_path(). Throws DataError like load().
  static Vocab from_serialized(const std::string& bytes, const std::string& name);
  /// One side of a Hugging Face tokenizer: `spm_bytes` cut text into pieces, `table` gives
  /// them ids. Throws DataError naming `name` when the two do not fit together.
  static Vocab from_hf(const TokenTable& table, const std::string& spm_bytes,
                       const std::string& name);

  /// Pieces of text as ids, without bos/eos; never a tag's id (the text `<BT>` is its
  /// characters' pieces).
  std::vector<int32_t> encode(std::string_view text) const;
  /// Detokenized text of ids; pad, bos and eos are dropped (for an imported vocabulary every
  /// special id, unk and language codes included, as its tokenizer's decode with
  /// skip_special_tokens=True).
  std::string decode(const std::vector<int32_t>& ids) const;
  int64_t size() const;
  /// The id of a piece (e.g. a tag), or nullopt when the model does not have it.
  std::optional<int32_t> piece_id(std::string_view piece) const;
  /// True when `id` is a control symbol (pad, bos, eos, a tag; an imported vocabulary's
  /// special tokens): inserted by id, never encoded from text.
  bool is_control(int32_t id) const;
  int32_t pad_id() const { return pad_id_; }
  /// The beginning-of-sentence token, never generated: `<s>` (an imported Marian vocabulary
  /// has none: its pad). The decoder's first input is the model's choice among bos, eos and
  /// pad (model.decoder_start: Marian's pad, M2M100's and NLLB's eos).
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t unk_id() const { return unk_id_; }
  const std::filesystem::path& model_path() const { return model_path_; }
  /// Content hash of the model file (16 hex digits), as checkpoints record it.
  const std::string& fingerprint() const { return fingerprint_; }
  /// Hash of the model as loaded (16 hex digits), for token cache keys: fingerprint() unless
  /// loading retyped user-defined tags, since their text then encodes otherwise than before.
  const std::string& encoding_fingerprint() const { return encoding_fingerprint_; }
  /// The tags the model file declares user-defined symbols and this Vocab treats as control
  /// symbols (empty for a model nmt-train trains now, or one without tags).
  const std::vector<std::string>& retyped_tags() const { return retyped_tags_; }
  /// The bytes from_serialized loaded this from (a .model file's, or an imported
  /// vocabulary's): what a checkpoint stores.
  const std::string& serialized() const { return *bytes_; }
  /// An imported vocabulary's table, or nullptr for a SentencePiece model's own ids.
  const TokenTable* hf_table() const;
  /// Where language tags go: the target's first in the source, unless an imported M2M100 or
  /// NLLB vocabulary says source and target codes.
  LanguageCodePlacement language_placement() const;

 private:
  /// The model's own ids, or an imported vocabulary's table (data/id_map.h).
  std::shared_ptr<const IdMap> ids_;
  std::shared_ptr<const std::string> bytes_;
  std::filesystem::path model_path_;
  std::string fingerprint_;
  std::string encoding_fingerprint_;
  std::vector<std::string> retyped_tags_;
  int32_t pad_id_ = kPadId, bos_id_ = kBosId, eos_id_ = kEosId, unk_id_ = kUnkId;
};

/// Source and target vocabularies (the same model when joint).
struct Vocabularies {
  Vocab src;
  Vocab tgt;
  bool joint = true;   ///< src and tgt share one model
  bool trained = false;  ///< a model was trained by this call (not loaded)
};

/// What checkpoints record of a run's vocabularies: the fingerprint of the joint model, or
/// "<source>+<target>".
std::string vocabularies_fingerprint(const Vocabularies& vocab);

/// Settings for training SentencePiece models.
struct VocabTrainingOptions {
  int threads = 1;    ///< files read at once to draw the sample (the same sample for any
                      ///< count); not for training: SentencePiece always trains with a fixed
                      ///< thread count (vocab.cpp), so any machine trains the same vocabulary
  uint32_t seed = 1;  ///< which sentences are sampled (data/line_sample.h)
};

/// Loads data.spm_model when set; otherwise reuses <run_dir>/vocab/{joint,src,tgt}.model or
/// trains it on the training data (written atomically, so concurrent readers never see a
/// partial model).
Vocabularies prepare_vocabularies(const DataOptions& options, const std::filesystem::path& run_dir,
                                  const VocabTrainingOptions& training);

}  // namespace nmt::data
