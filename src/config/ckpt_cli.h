#pragma once
// The command line of nmt-ckpt (CLI11): subcommands info, diff, average, layout, import-hf
// and export-hf.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "decode/translate_options.h"

namespace nmt::config {

/// The nmt-ckpt subcommands.
enum class CkptAction { kInfo, kDiff, kAverage, kLayout, kImportHf, kExportHf };

/// What nmt-ckpt was asked to do.
struct CkptCommand {
  std::optional<int> exit_code;  ///< set when parsing already answered (--help, usage error)
  CkptAction action = CkptAction::kInfo;  ///< the subcommand
  /// info: PATH; diff: A B; average: IN...; import-hf: HF_DIR; export-hf: IN
  std::vector<std::string> inputs;
  std::string output;        ///< average, import-hf, export-hf: OUT
  double atol = 0;           ///< diff: largest absolute difference counted as equal
  bool all_tensors = false;  ///< diff: compare every tensor, not only model.*
  int64_t average = 0;       ///< export-hf: > 1 averages the newest K checkpoints
  decode::WeightsChoice weights = decode::WeightsChoice::kAuto;  ///< export-hf: ema or raw
  bool force = false;  ///< average, import-hf, export-hf: replace OUT when it exists
};

/// Parses argv. Prints help, version or a usage error itself and sets exit_code then.
CkptCommand parse_ckpt_command(int argc, const char* const* argv);

}  // namespace nmt::config
