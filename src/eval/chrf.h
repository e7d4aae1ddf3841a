#pragma once
// Corpus chrF and chrF++ exactly as sacreBLEU 2.6.0 computes them with its defaults
// (metrics/chrf.py): character n-grams up to 6 over code points with whitespace removed,
// word n-grams up to word_order (0: chrF, 2: chrF++) after splitting off a leading or
// trailing ASCII punctuation mark, beta 2, case-sensitive, and sacreBLEU's default averaging
// of precision and recall over the orders that occur (eps_smoothing=False, shown as "eff:yes"
// in the signature). With several references each sentence uses the one with the best
// sentence-level F score; the chosen statistics are summed over the corpus.

#include <cstdint>
#include <string>
#include <vector>

#include "eval/score_format.h"

namespace nmt::eval {

/// The sufficient statistics of chrF over some sentences.
struct ChrfStats {
  int word_order = 0;          ///< word n-gram order (0: chrF, 2: chrF++)
  int nrefs = 1;               ///< reference streams (for the signature)
  std::vector<int64_t> stats;  ///< per order (6 char orders, then word orders): hyp, ref, match
  ChrfStats& operator+=(const ChrfStats& other);
};

/// A corpus chrF score.
struct ChrfResult {
  double score = 0;       ///< chrF, 0-100
  std::string name;       ///< "chrF2" or "chrF2++" (one '+' per word order)
  std::string signature;  ///< "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0"
};

/// chrF statistics of hyps against refs, where refs[k][i] is the k-th reference of hyps[i].
/// Throws nmt::DataError when there is no stream or a stream's length differs from hyps'.
ChrfStats chrf_stats(const std::vector<std::string>& hyps,
                     const std::vector<std::vector<std::string>>& refs, int word_order = 0);

/// The score of accumulated statistics.
ChrfResult compute_chrf(const ChrfStats& stats);

/// compute_chrf(chrf_stats(hyps, refs, word_order)); word_order 2 gives chrF++.
ChrfResult corpus_chrf(const std::vector<std::string>& hyps,
                       const std::vector<std::vector<std::string>>& refs, int word_order = 0);

/// The signature of default chrF with nrefs reference streams and the given word order.
std::string chrf_signature(int nrefs, int word_order);

/// As sacreBLEU shows it: "chrF2 = 55.12", with_signature: "chrF2|<signature> = 55.12".
std::string format_chrf(const ChrfResult& result, int width = 2, bool with_signature = false);

/// The result as a MetricScore (for format_text / format_json).
MetricScore to_metric_score(const ChrfResult& result);

}  // namespace nmt::eval
