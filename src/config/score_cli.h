#pragma once
// The command line of nmt-score (CLI11): sacreBLEU-compatible BLEU, chrF and chrF++ of a
// hypothesis file (or stdin) against one or more reference files.

#include <optional>
#include <string>
#include <vector>

namespace nmt::config {

/// The metrics nmt-score computes.
enum class ScoreMetric { kBleu, kChrf, kChrfPlusPlus };

/// What nmt-score was asked to do.
struct ScoreCommand {
  std::optional<int> exit_code;   ///< set when parsing already answered (--help, usage)
  std::vector<std::string> refs;  ///< reference files, one stream each (at least one)
  std::string input;              ///< hypothesis file; empty: read stdin
  std::vector<ScoreMetric> metrics = {ScoreMetric::kBleu};  ///< in output order, no repeats
  bool json = false;        ///< print sacreBLEU's JSON instead of text
  bool score_only = false;  ///< print only the number of each metric
  int width = 2;            ///< decimals of the printed scores
};

/// Parses argv. Prints help, version or a usage error itself and sets exit_code then.
ScoreCommand parse_score_command(int argc, const char* const* argv);

}  // namespace nmt::config
