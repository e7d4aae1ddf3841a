#pragma once
// The command line of nmt-translate (CLI11).

#include <optional>
#include <string>

#include "decode/translate_options.h"

namespace nmt::config {

/// What nmt-translate was asked to do.
struct TranslateCommand {
  std::optional<int> exit_code;      ///< set when parsing already answered (--help, usage)
  decode::TranslateOptions options;  ///< model, batching, device and search settings
  std::string input = "-";           ///< input text file ("-": stdin)
  std::string output = "-";          ///< output file ("-": stdout)
  std::string log_level = "info";    ///< console log level
  std::string stats_json;            ///< if set, the run's figures as JSON (for scripts)
  /// Set: score the pairs (input line i, this file's line i) teacher-forced instead of
  /// translating; each output line is "sum<TAB>mean<TAB>tokens" (decode/pair_scoring.h).
  std::string score_targets;
  /// Set: decode the input as a corpus on this many workers (decode/corpus_translation.h),
  /// resumably; unset: one process, as a plain filter (unless a launcher started it as a rank).
  std::optional<int> nproc_per_node;
  int64_t shard_lines = 0;      ///< input lines per shard of a corpus; 0: automatic
  bool force = false;           ///< a corpus folder of a run with other arguments: start over
};

/// Parses argv. Prints help, version or a usage error itself and sets exit_code then.
TranslateCommand parse_translate_command(int argc, const char* const* argv);

}  // namespace nmt::config
