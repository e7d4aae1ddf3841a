#include "train/batch_fit.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace nmt::train {

BatchFitResult fit_batch(const MeasureStep& measure, const BatchFitOptions& options) {
  NMT_CHECK(options.max_sentences >= 1 && options.limit_bytes > 0 && options.max_probes >= 2,
            Error, "batch fit: expected a cap >= 1, a limit > 0 and >= 2 probes, found {}, {}, {}",
            options.max_sentences, options.limit_bytes, options.max_probes);
  BatchFitResult result;
  std::vector<BatchProbe> fitted;  // ascending sentence counts that fitted
  int64_t too_many = options.max_sentences + 1;  // smallest count known not to fit
  const auto run = [&](int64_t sentences) {
    BatchProbe probe{sentences, measure(sentences)};
    result.probes.push_back(probe);
    if (probe.peak_bytes && *probe.peak_bytes <= options.limit_bytes) {
      fitted.push_back(probe);
      std::sort(fitted.begin(), fitted.end(),
                [](const BatchProbe& a, const BatchProbe& b) { return a.sentences < b.sentences; });
    } else {
      too_many = std::min(too_many, sentences);
    }
  };
  run(1);
  NMT_CHECK(!fitted.empty(), Error,
            "one sentence of the longest length needs {} MiB at its peak, more than the {} MiB "
            "allowed",
            result.probes[0].peak_bytes ? *result.probes[0].peak_bytes >> 20 : -1,
            options.limit_bytes >> 20);
  while (static_cast<int>(result.probes.size()) < options.max_probes) {
    const BatchProbe& best = fitted.back();
    if (too_many - best.sentences <= 1) break;
    // Guess: a secant through the two largest fits, aimed a little under the limit so that it
    // lands just inside rather than just over; the first guess is the caller's.
    int64_t next = options.first_guess;
    if (fitted.size() >= 2) {
      const BatchProbe& below = fitted[fitted.size() - 2];
      const double slope = double(*best.peak_bytes - *below.peak_bytes) /
                           double(best.sentences - below.sentences);
      next = slope > 0 ? best.sentences + static_cast<int64_t>(std::floor(
                                              0.99 * double(options.limit_bytes - *best.peak_bytes) / slope))
                       : 2 * best.sentences;
    }
    next = std::min(next, options.max_sentences);
    if (next <= best.sentences) break;  // the model puts the limit before the next count
    // A guess past a count that did not fit: bisect the bracket instead.
    if (next >= too_many) next = best.sentences + (too_many - best.sentences) / 2;
    if (double(next - best.sentences) <= options.precision * double(best.sentences)) break;
    run(next);
  }
  result.sentences = fitted.back().sentences;
  result.peak_bytes = *fitted.back().peak_bytes;
  return result;
}

}  // namespace nmt::train
