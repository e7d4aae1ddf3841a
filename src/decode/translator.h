#pragma once
// Translating text with a trained checkpoint, or an ensemble of them: loads each model
// (optionally averaging the newest checkpoints of a run) and its SentencePiece vocabulary from
// the checkpoint (decode/model_loading.h), encodes lines, batches them by tokens
// (batch_search.h), searches (search.h; an ensemble: ensemble.h) and detokenizes. No torch
// types in this header.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "decode/translate_options.h"
#include "model/model_options.h"

namespace nmt::decode {

/// Reads the model options from a checkpoint's stored config YAML (`origin` names the
/// checkpoint for messages). Supplied by config/ (config::stored_model_options), since only
/// config/ reads YAML.
using ModelConfigReader =
    std::function<model::ModelOptions(const std::string& yaml, const std::string& origin)>;

/// One translation of one input line.
struct Translation {
  std::string text;             ///< detokenized output
  std::vector<int32_t> tokens;  ///< target ids, without BOS and EOS
  double score = 0;             ///< sum of log-probabilities
  double normalized_score = 0;  ///< score / length penalty
};

/// The teacher-forced score of one (source, target) pair (nmt-translate --score).
struct PairScore {
  double log_prob = 0;  ///< sum of log-probabilities of the target tokens and EOS
  int64_t tokens = 0;   ///< target tokens scored (EOS included)
};

/// Where one model of a Translator came from, and its weight in the ensemble.
struct ModelSource {
  std::vector<std::filesystem::path> files;  ///< its checkpoint file(s) (several when averaged,
                                             ///< oldest first)
  double weight = 1;                         ///< its share of the ensemble; the weights sum to 1
  double load_seconds = 0;  ///< reading its checkpoint(s), building and packing the model
};

/// Totals of a translate_file() call.
struct TranslateStats {
  int64_t sentences = 0;      ///< input lines
  int64_t source_tokens = 0;  ///< source pieces (EOS included)
  int64_t output_tokens = 0;  ///< pieces of the best hypotheses (EOS excluded)
  double seconds = 0;         ///< wall time, reading and writing included
};

/// A loaded model (or ensemble) with its vocabularies, ready to translate.
class Translator {
 public:
  /// Loads each of options.checkpoints: a checkpoint file, or a run directory whose
  /// checkpoints/ folder (or the folder itself) holds checkpoint-*.safetensors, taking the
  /// best by train.best_metric (lowest "selection" metadata) else the newest, or with
  /// average > 1 the mean of the newest `average`. Several: an ensemble, weighted by
  /// options.ensemble_weights. Throws CheckpointError, ConfigError (bad options; checkpoints of
  /// different vocabularies in an ensemble, naming both) or DeviceError (--device cuda without
  /// a GPU).
  Translator(const TranslateOptions& options, const ModelConfigReader& read_config);
  ~Translator();
  Translator(const Translator&) = delete;
  Translator& operator=(const Translator&) = delete;

  /// Translates lines; result i holds search.nbest translations of line i, best first (an
  /// empty or blank line gives empty texts with score 0; with search.sampling, line i draws
  /// from (seed, i), as in translate_file). Throws DataError naming the line
  /// (1-based) of the first invalid UTF-8 line.
  std::vector<std::vector<Translation>> translate(const std::vector<std::string>& lines);

  /// translate() for lines [first_line, first_line + lines.size()) of a larger input (0-based):
  /// sampling draws as translate_file does for them, and errors name the line in the whole
  /// input. Adds the figures to `stats` (sentences, tokens; not seconds) and calls `on_batch`
  /// (when set) with the count of these lines done after each batch.
  std::vector<std::vector<Translation>> translate(const std::vector<std::string>& lines,
                                                  int64_t first_line, TranslateStats* stats,
                                                  const std::function<void(int64_t)>& on_batch);

  /// Teacher-forced scores of pairs (sources[i], targets[i]), lines [first_line, first_line +
  /// sources.size()) of a larger input (0-based, for messages): the target as training reads
  /// it (the target language's prefix, the pieces cut to the model's positions, EOS) given the
  /// source as translate() encodes it (a blank one: EOS alone). Batched by --max-tokens in
  /// length order (decode/forced_scores.h). Adds sentences, source tokens and target tokens
  /// (as output_tokens) to `stats` and calls `on_batch` as translate() does. Throws DataError
  /// for unequal counts or invalid UTF-8 (naming the line).
  std::vector<PairScore> score(const std::vector<std::string>& sources,
                               const std::vector<std::string>& targets, int64_t first_line,
                               TranslateStats* stats, const std::function<void(int64_t)>& on_batch);

  /// The output lines of one input line, as translate_file writes them ("\n"-terminated).
  std::string output_text(const std::vector<Translation>& translations) const;

  /// Translates the lines of input ("-": stdin) into output ("-": stdout): search.nbest output
  /// lines per input line, in input order; with with_scores each line is "text\tscore".
  /// Reports progress on stderr for long inputs. Throws DataError naming file:line for
  /// invalid UTF-8.
  TranslateStats translate_file(const std::string& input, const std::string& output);

  /// The ids the encoder reads for `line`: --tgt-lang's tag (a multilingual model), the
  /// line's pieces, EOS; cut to the model's positions; empty for a blank line. Text never
  /// gives a tag's id: the text `<2en>` is its characters (data/lang_tags.h).
  std::vector<int64_t> source_ids(const std::string& line) const;

  /// Where each model came from, in the order of options.checkpoints, with its weight.
  const std::vector<ModelSource>& models() const;
  /// "cpu" or "cuda:0".
  std::string device_name() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nmt::decode
