#pragma once
// Validation during training: the loss on the validation set and, with
// train.valid_translate, its translations (decode/) scored with sacreBLEU's BLEU and chrF
// (eval/), each rank taking its share and the sums reduced over the ranks. It also keeps the
// record that picks the best checkpoint and drives early stopping (train.best_metric,
// train.patience), which checkpoints save and a resumed run restores. The decode and eval
// dependencies of training live here and nowhere else.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "train/run_setup.h"

namespace nmt::data {
struct PreparedData;
}

namespace nmt::train {

/// The figures of one validation set.
struct SetScores {
  std::string name;             ///< the set's name in data.valid ("valid" for data.valid_src)
  std::string pair;             ///< its language pair, "en-de"; empty when the set names none
  double loss = 0;              ///< per-token loss (label-smoothed)
  double nll = 0;               ///< per-token negative log-likelihood
  int64_t tokens = 0;           ///< target tokens of the set (all ranks)
  std::optional<double> bleu;   ///< with train.valid_translate
  std::optional<double> chrf;   ///< with train.valid_translate
};

/// What one validation measured and decided.
struct ValidationResult {
  SetScores first;                ///< the first set of data.valid
  std::vector<SetScores> others;  ///< the other validation sets, in config order
  /// Lower is better: the loss, or minus BLEU or chrF (train.best_metric), of the set that
  /// train.best_set names (the first by default), or their mean over all sets ("mean").
  double selection = 0;
  bool best = false;              ///< the best selection so far
  int64_t without_improvement = 0;  ///< validations since the best one
  double seconds = 0;             ///< wall time of the validation
};

/// The record of the run's validations that checkpoints keep.
struct ValidationRecord {
  std::optional<double> best_selection;  ///< best selection so far (lower is better)
  int64_t without_improvement = 0;       ///< validations since the best one
};

/// What ranks checkpoints in `v` (lower is better): train.best_metric of the set named
/// `best_set`, of the first set when it is empty, or its mean over all sets for "mean".
/// Throws ConfigError when no set has that name.
double selection_of(const ValidationResult& v, const std::string& best_set, BestMetric metric);

/// Validates one rank's model.
class Validator {
 public:
  /// Needs data.valid (the validation sets prepared with the training data).
  Validator(const RunSetup& setup, const data::PreparedData& data);
  ~Validator();
  Validator(const Validator&) = delete;
  Validator& operator=(const Validator&) = delete;

  /// Validates `model` (every rank must call it) and updates the record.
  ValidationResult validate(model::Transformer& model);
  /// The record so far, and restoring it on resume.
  const ValidationRecord& record() const { return record_; }
  void restore(const ValidationRecord& record) { record_ = record; }
  /// True when train.patience validations in a row brought no improvement.
  bool patience_exhausted() const;
  /// "validation loss", "BLEU" or "chrF": what train.best_metric ranks by.
  const char* metric_name() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
  ValidationRecord record_;
};

}  // namespace nmt::train
