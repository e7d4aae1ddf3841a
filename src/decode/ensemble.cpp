#include "decode/ensemble.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "util/error.h"

namespace nmt::decode {

Ensemble::Ensemble(model::TransformerImpl& model) : models_{&model}, weights_{1.0} {}

Ensemble::Ensemble(std::vector<model::TransformerImpl*> models, const std::vector<double>& weights)
    : models_(std::move(models)) {
  NMT_CHECK(!models_.empty(), ConfigError, "an ensemble needs at least one model");
  NMT_CHECK(weights.empty() || weights.size() == models_.size(), ConfigError,
            "ensemble weights: expected one per model ({}), found {}", models_.size(),
            weights.size());
  weights_ = weights.empty() ? std::vector<double>(models_.size(), 1.0) : weights;
  double sum = 0;
  for (const double w : weights_) {
    NMT_CHECK(std::isfinite(w) && w > 0, ConfigError,
              "ensemble weights: expected finite numbers > 0, found {}", w);
    sum += w;
  }
  for (double& w : weights_) w /= sum;
  const int64_t vocab = models_[0]->output_weight().size(0);
  for (size_t i = 1; i < models_.size(); ++i)
    NMT_CHECK(models_[i]->output_weight().size(0) == vocab, ConfigError,
              "ensemble: model {} has {} target tokens but model 0 has {}: an ensemble needs one "
              "vocabulary",
              i, models_[i]->output_weight().size(0), vocab);
}

int64_t Ensemble::max_positions() const {
  int64_t positions = models_[0]->options().max_positions;
  for (const model::TransformerImpl* m : models_)
    positions = std::min(positions, m->options().max_positions);
  return positions;
}

}  // namespace nmt::decode
