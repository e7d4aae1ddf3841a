#pragma once
// Subword vocabularies through SentencePiece's C++ API: load a model, or train one on the
// training data and keep it in the run directory for every later run and resume.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/data_options.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace nmt::data {

/// Special ids of every vocabulary nmt-train trains (a given model must define pad, bos, eos).
constexpr int32_t kPadId = 0;
constexpr int32_t kUnkId = 1;
constexpr int32_t kBosId = 2;
constexpr int32_t kEosId = 3;

/// A loaded SentencePiece model.
class Vocab {
 public:
  /// Loads a model; throws DataError when it cannot be read or lacks pad, bos or eos pieces.
  static Vocab load(const std::filesystem::path& model);
  /// Loads a model from the bytes of a .model file (e.g. kept in a checkpoint); `name` says
  /// where they came from, for messages and model_path(). Throws DataError like load().
  static Vocab from_serialized(const std::string& bytes, const std::string& name);

  /// Pieces of text as ids, without bos/eos.
  std::vector<int32_t> encode(std::string_view text) const;
  /// Detokenized text of ids; pad, bos and eos are dropped.
  std::string decode(const std::vector<int32_t>& ids) const;
  int64_t size() const;
  /// The id of a piece (e.g. a tag), or nullopt when the model does not have it.
  std::optional<int32_t> piece_id(std::string_view piece) const;
  int32_t pad_id() const { return pad_id_; }
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t unk_id() const { return unk_id_; }
  const std::filesystem::path& model_path() const { return model_path_; }
  /// Content hash of the model file (16 hex digits), for cache keys and checkpoints.
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor_;
  std::filesystem::path model_path_;
  std::string fingerprint_;
  int32_t pad_id_ = kPadId, bos_id_ = kBosId, eos_id_ = kEosId, unk_id_ = kUnkId;
};

/// Source and target vocabularies (the same model when joint).
struct Vocabularies {
  Vocab src;
  Vocab tgt;
  bool joint = true;   ///< src and tgt share one model
  bool trained = false;  ///< a model was trained by this call (not loaded)
};

/// Settings for training SentencePiece models.
struct VocabTrainingOptions {
  int threads = 1;     ///< not for training: SentencePiece always trains with a fixed thread
                       ///< count (vocab.cpp), so any machine trains the same vocabulary
  uint32_t seed = 1;   ///< seed for sentence sampling
};

/// Loads data.spm_model when set; otherwise reuses <run_dir>/vocab/{joint,src,tgt}.model or
/// trains it on the training data (written atomically, so concurrent readers never see a
/// partial model).
Vocabularies prepare_vocabularies(const DataOptions& options, const std::filesystem::path& run_dir,
                                  const VocabTrainingOptions& training);

}  // namespace nmt::data
