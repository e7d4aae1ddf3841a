#pragma once
// The models one search or one scoring pass decodes with: a single Transformer, or an ensemble
// of them (nmt-translate -c A -c B). An ensemble's next-token log-probability is the weighted
// mean of its models' log-softmax at every step,
//
//   log p(y | ...) = sum_m w_m log p_m(y | ...),   w_m > 0, sum_m w_m = 1,
//
// Marian's ensemble combination (a weighted sum of log-probabilities, here normalized to a
// mean; fairseq's --ensemble averages probabilities instead). A hypothesis' score is then the
// weighted mean of its models' scores. Models may differ in shape (layers, widths, positions)
// but must share the target vocabulary: checked here by size, by content where they are
// loaded (decode/model_loading.h). One model is the trivial case, decoded as before: search
// and scoring skip the weighting for it.
//
//   Ensemble one(*model);                          // what search(*model, ...) builds
//   Ensemble two({&*a, &*b}, {0.6, 0.4});          // weights relative; normalized here

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/transformer.h"

namespace nmt::decode {

/// Non-owning views of the models of a search, with their weights; the models must outlive it.
class Ensemble {
 public:
  /// One model, weight 1. Implicit, so that search(*model, ...) reads as before.
  Ensemble(model::TransformerImpl& model);  // NOLINT: implicit by design
  /// Several models with relative weights (one per model, finite and > 0; empty: equal),
  /// normalized to sum 1. Throws ConfigError for no model, a weight count that differs from
  /// the models', a weight <= 0, or models of different target vocabulary sizes.
  Ensemble(std::vector<model::TransformerImpl*> models, const std::vector<double>& weights = {});

  /// Models in the ensemble.
  size_t size() const { return models_.size(); }
  /// Model i.
  model::TransformerImpl& model(size_t i) const { return *models_[i]; }
  /// Weight of model i (the weights sum to 1).
  double weight(size_t i) const { return weights_[i]; }
  /// Every weight, in model order.
  const std::vector<double>& weights() const { return weights_; }
  /// The fewest positions of any model: what sources and outputs are cut to (tokens).
  int64_t max_positions() const;

 private:
  std::vector<model::TransformerImpl*> models_;
  std::vector<double> weights_;
};

}  // namespace nmt::decode
