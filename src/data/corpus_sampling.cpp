#include "data/corpus_sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "util/error.h"

namespace nmt::data {

std::vector<int64_t> drawn_per_epoch(const std::vector<CorpusSize>& corpora, double temperature) {
  NMT_CHECK(temperature > 0 && std::isfinite(temperature), DataError,
            "data.sampling_temperature: expected a number > 0, found {}", temperature);
  // Beyond 2^53 a double no longer holds every count, and llround past int64 has no result.
  constexpr double kMaxDrawn = 9007199254740992.0;  // 2^53
  std::vector<int64_t> drawn;
  int64_t total = 0;
  for (const CorpusSize& c : corpora) {
    const double exact = c.weight * static_cast<double>(c.pairs);
    NMT_CHECK(std::isfinite(exact) && exact >= 0 && exact <= kMaxDrawn, DataError,
              "corpus {} of data.train: weight {} x {} pairs is {} pairs an epoch, more than "
              "can be counted",
              drawn.size() + 1, c.weight, c.pairs, exact);
    drawn.push_back(static_cast<int64_t>(std::llround(exact)));
    total += drawn.back();
  }
  // T = 1 takes the weights' counts as they are: bit for bit what runs before T existed drew.
  if (temperature == 1.0 || corpora.empty()) return drawn;
  // The masses w n^(1/T) in log space, scaled by the largest: n^(1/T) itself overflows a
  // double at T = 0.01 from about 1,200 pairs (inf / inf would make the shares NaN).
  std::vector<double> log_mass;
  double top = -std::numeric_limits<double>::infinity();
  for (const CorpusSize& c : corpora) {
    log_mass.push_back(c.pairs > 0 ? std::log(c.weight) +
                                         std::log(static_cast<double>(c.pairs)) / temperature
                                   : -std::numeric_limits<double>::infinity());
    top = std::max(top, log_mass.back());
  }
  if (top == -std::numeric_limits<double>::infinity()) return drawn;  // only empty corpora
  std::vector<double> mass;
  for (double m : log_mass) mass.push_back(std::exp(m - top));  // in [0, 1], the top one 1
  const double sum = std::accumulate(mass.begin(), mass.end(), 0.0);
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
