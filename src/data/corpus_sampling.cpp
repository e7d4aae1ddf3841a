#include "data/corpus_sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/error.h"

namespace nmt::data {

std::vector<int64_t> drawn_per_epoch(const std::vector<CorpusSize>& corpora, double temperature) {
  NMT_CHECK(temperature > 0 && std::isfinite(temperature), DataError,
            "data.sampling_temperature: expected a number > 0, found {}", temperature);
  std::vector<int64_t> drawn;
  int64_t total = 0;
  for (const CorpusSize& c : corpora) {
    drawn.push_back(static_cast<int64_t>(std::llround(c.weight * static_cast<double>(c.pairs))));
    total += drawn.back();
  }
  // T = 1 takes the weights' counts as they are: bit for bit what runs before T existed drew.
  if (temperature == 1.0 || corpora.empty()) return drawn;
  std::vector<double> mass;
  for (const CorpusSize& c : corpora)
    mass.push_back(c.weight * std::pow(static_cast<double>(c.pairs), 1.0 / temperature));
  const double sum = std::accumulate(mass.begin(), mass.end(), 0.0);
  if (sum <= 0) return drawn;  // only empty corpora
  std::vector<double> remainder(corpora.size());
  int64_t given = 0;
  for (size_t i = 0; i < corpora.size(); ++i) {
    const double exact = static_cast<double>(total) * mass[i] / sum;
    drawn[i] = static_cast<int64_t>(std::floor(exact));
    remainder[i] = exact - static_cast<double>(drawn[i]);
    given += drawn[i];
  }
  std::vector<size_t> order(corpora.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return remainder[a] > remainder[b]; });
  for (size_t k = 0; given < total && k < order.size(); ++k, ++given) ++drawn[order[k]];
  return drawn;
}

}  // namespace nmt::data
