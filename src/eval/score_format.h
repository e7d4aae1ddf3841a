#pragma once
// How sacreBLEU 2.x prints a score (metrics/base.py Score.format and utils.py
// print_single_results), shared by BLEU and chrF.

#include <string>
#include <string_view>
#include <vector>

namespace nmt::eval {

/// The sacreBLEU release whose numbers, signatures and output format we reproduce; it is the
/// "version:" field of every signature.
inline constexpr std::string_view kSacrebleuVersion = "2.6.0";

/// One metric's result as sacreBLEU presents it.
struct MetricScore {
  std::string name;       ///< "BLEU", "chrF2", "chrF2++"
  double score = 0;       ///< 0-100
  std::string verbose;    ///< text after the score (BLEU: precisions, BP, lengths), or empty
  std::string signature;  ///< e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
};

/// score with `width` decimals, rounded like Python's f"{score:.{width}f}".
std::string format_fixed(double score, int width);

/// "NAME = SCORE VERBOSE", or "NAME|SIGNATURE = SCORE VERBOSE" with_signature (sacreBLEU's text).
std::string format_text(const MetricScore& score, int width, bool with_signature);

/// sacreBLEU's JSON object (json.dumps(indent=1)): name, score rounded to width, signature,
/// verbose_score (when there is one), then each signature field as a string.
std::string format_json(const MetricScore& score, int width);

/// Several text lines as sacreBLEU prints them together: right-aligned on their first '='.
/// Lines without '=' (score only) are printed as they are. Each line ends with '\n'.
std::string align_text_lines(const std::vector<std::string>& lines);

/// Several JSON objects as sacreBLEU prints them: one object alone, or a list "[\n...\n]".
/// Ends with '\n'.
std::string join_json(const std::vector<std::string>& objects);

}  // namespace nmt::eval
