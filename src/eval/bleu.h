#pragma once
// Corpus BLEU exactly as sacreBLEU 2.6.0 computes it with its defaults (metrics/bleu.py):
// 13a tokenization, n-grams up to 4, 'exp' smoothing, brevity penalty against the closest
// reference length (the shorter one on ties), no effective order, case-sensitive.
//
//   const BleuResult r = corpus_bleu(hyps, {refs});      // one reference stream
//   log::info("valid", "{}", format_bleu(r));             // BLEU = 27.34 60.1/33.2/... (BP = ...)
//
// Sentence statistics are integers summed over the corpus, so statistics of shards (ranks)
// can be added with += and scored once with compute_bleu.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "eval/score_format.h"

namespace nmt::eval {

/// The sufficient statistics of BLEU over some sentences.
struct BleuStats {
  int64_t sys_len = 0;              ///< hypothesis tokens
  int64_t ref_len = 0;              ///< tokens of the closest reference of each sentence
  std::array<int64_t, 4> counts{};  ///< clipped n-gram matches, n = 1..4
  std::array<int64_t, 4> totals{};  ///< hypothesis n-grams, n = 1..4
  int nrefs = 1;                    ///< reference streams (for the signature)
  BleuStats& operator+=(const BleuStats& other);
};

/// A corpus BLEU score with what sacreBLEU reports alongside it.
struct BleuResult {
  double score = 0;                    ///< BLEU, 0-100
  std::array<double, 4> precisions{};  ///< n-gram precisions in percent ('exp' smoothed)
  double bp = 0;                       ///< brevity penalty, 0-1
  double ratio = 0;                    ///< sys_len / ref_len (0 when ref_len is 0)
  int64_t sys_len = 0;                 ///< hypothesis tokens
  int64_t ref_len = 0;                 ///< effective reference tokens
  std::array<int64_t, 4> counts{};     ///< clipped n-gram matches, n = 1..4
  std::array<int64_t, 4> totals{};     ///< hypothesis n-grams, n = 1..4
  std::string signature;  ///< "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
};

/// BLEU statistics of hyps against refs, where refs[k][i] is the k-th reference of hyps[i]
/// (one vector per reference stream). Throws nmt::DataError when there is no stream or a
/// stream's length differs from hyps'.
BleuStats bleu_stats(const std::vector<std::string>& hyps,
                     const std::vector<std::vector<std::string>>& refs);

/// The score of accumulated statistics (sacrebleu's BLEU.compute_bleu).
BleuResult compute_bleu(const BleuStats& stats);

/// compute_bleu(bleu_stats(hyps, refs)).
BleuResult corpus_bleu(const std::vector<std::string>& hyps,
                       const std::vector<std::vector<std::string>>& refs);

/// The signature of default BLEU with nrefs reference streams.
std::string bleu_signature(int nrefs);

/// As sacreBLEU shows it: "BLEU = 27.34 60.1/33.2/20.0/12.8 (BP = 0.982 ratio = 0.982
/// hyp_len = 100 ref_len = 102)"; with_signature puts "|<signature>" after "BLEU".
std::string format_bleu(const BleuResult& result, int width = 2, bool with_signature = false);

/// The result as a MetricScore (for format_text / format_json).
MetricScore to_metric_score(const BleuResult& result);

}  // namespace nmt::eval
