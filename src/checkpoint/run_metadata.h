#pragma once
// The metadata of a training checkpoint as a typed struct: the update and data position it
// holds, the config and vocabulary it was trained with, and the validation and early-stopping
// record. Every key is a named constant below and nowhere else; parsing checks each value and
// throws CheckpointError naming the file and the key, so a damaged field makes a damaged
// checkpoint (which --resume auto passes over for an older one), never an internal error.
// No torch types here: tools that only read metadata need not compile against LibTorch.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nmt::checkpoint {

/// The metadata keys of a training checkpoint.
namespace meta_key {
inline constexpr std::string_view kStep = "step";                      ///< updates done
inline constexpr std::string_view kEpoch = "epoch";                    ///< epoch of the last update
inline constexpr std::string_view kIteratorEpoch = "iterator_epoch";   ///< data position: epoch
inline constexpr std::string_view kIteratorStep = "iterator_step";     ///< data position: step in it
inline constexpr std::string_view kWorldSize = "world_size";           ///< ranks that trained it
inline constexpr std::string_view kUpdateFreq = "update_freq";         ///< batches per update per rank
/// Data position: this epoch's updates under earlier global batches ("group:updates,...").
inline constexpr std::string_view kIteratorConsumed = "iterator_consumed";
inline constexpr std::string_view kConfig = "config";                  ///< effective config YAML
inline constexpr std::string_view kConfigHash = "config_hash";         ///< hash of that YAML
inline constexpr std::string_view kVocabFingerprint = "vocab_fingerprint";
inline constexpr std::string_view kVocabJoint = "vocab_joint";         ///< "true" or "false"
inline constexpr std::string_view kElapsed = "elapsed_s";              ///< training wall time (s)
inline constexpr std::string_view kValidLoss = "valid_loss";
inline constexpr std::string_view kValidBleu = "valid_bleu";
inline constexpr std::string_view kValidChrf = "valid_chrf";
/// What ranks checkpoints, lower is better: the validation loss, or minus BLEU or chrF.
inline constexpr std::string_view kSelection = "selection";
inline constexpr std::string_view kBestSelection = "best_selection";
inline constexpr std::string_view kWithoutImprovement = "validations_without_improvement";
/// The languages of a multilingual run (data.train's src_lang and tgt_lang), sorted and
/// comma-separated ("de,en"); absent when the corpora name none.
inline constexpr std::string_view kLanguages = "languages";
/// "target" when every source starts with its target language's tag (data.lang_tags), which
/// makes the model multilingual: nmt-translate then needs --tgt-lang. Absent: no tags.
inline constexpr std::string_view kLangTags = "lang_tags";
}  // namespace meta_key

/// What a training checkpoint says about itself.
struct RunMetadata {
  int64_t step = 0;              ///< updates done
  int64_t epoch = 0;             ///< epoch of the last update
  int64_t iterator_epoch = 1;    ///< where the data continues: epoch (1-based)
  int64_t iterator_step = 0;     ///< where the data continues: step within that epoch
  int64_t world_size = 1;        ///< ranks that trained it
  int64_t update_freq = 0;       ///< batches per update per rank; 0: not recorded (older files)
  std::string iterator_consumed; ///< data position: updates under earlier global batches
  std::string config;            ///< the effective config as YAML
  std::string config_hash;       ///< config_hash() of it
  std::string vocab_fingerprint; ///< fingerprint of the SentencePiece model(s)
  bool vocab_joint = true;       ///< one vocabulary for source and target
  double elapsed_s = 0;          ///< training wall time so far (seconds)
  std::optional<double> valid_loss;      ///< per-token loss of the validation at this step
  std::optional<double> valid_bleu;      ///< its BLEU, with train.valid_translate
  std::optional<double> valid_chrf;      ///< its chrF, with train.valid_translate
  std::optional<double> selection;       ///< lower is better (loss or minus BLEU/chrF)
  std::optional<double> best_selection;  ///< best selection of the run so far
  int64_t validations_without_improvement = 0;  ///< early-stopping count
  std::vector<std::string> languages;  ///< the run's languages, sorted; empty: none named
  bool target_lang_tags = false;       ///< sources start with the target language's tag

  /// The metadata map a checkpoint stores.
  std::map<std::string, std::string> to_map() const;
  /// Parses what a checkpoint stores. Keys that are absent keep their defaults (tools read
  /// checkpoints that hold only a model and its config); a value that is present but
  /// malformed throws CheckpointError "<origin>: metadata <key>: expected ..., found '...'".
  static RunMetadata parse(const std::map<std::string, std::string>& metadata,
                           const std::string& origin);
  /// parse(), and every key that resuming training needs must be present (CheckpointError
  /// naming the first missing one otherwise).
  static RunMetadata parse_resumable(const std::map<std::string, std::string>& metadata,
                                     const std::string& origin);
};

/// The selection value of a checkpoint's metadata; nullopt when absent, not a number or not
/// finite (such a file is never "best").
std::optional<double> selection_of(const std::map<std::string, std::string>& metadata);

}  // namespace nmt::checkpoint
