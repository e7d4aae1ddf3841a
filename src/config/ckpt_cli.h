#pragma once
// The command line of nmt-ckpt (CLI11): subcommands info, diff, average, layout, import-hf.

#include <optional>
#include <string>
#include <vector>

namespace nmt::config {

/// The nmt-ckpt subcommands.
enum class CkptAction { kInfo, kDiff, kAverage, kLayout, kImportHf };

/// What nmt-ckpt was asked to do.
struct CkptCommand {
  std::optional<int> exit_code;  ///< set when parsing already answered (--help, usage error)
  CkptAction action = CkptAction::kInfo;  ///< the subcommand
  std::vector<std::string> inputs;  ///< info: PATH; diff: A B; average: IN...; import-hf: HF_DIR
  std::string output;               ///< average, import-hf: OUT
  double atol = 0;                        ///< diff: largest absolute difference counted as equal
  bool all_tensors = false;               ///< diff: compare every tensor, not only model.*
};

/// Parses argv. Prints help, version or a usage error itself and sets exit_code then.
CkptCommand parse_ckpt_command(int argc, const char* const* argv);

}  // namespace nmt::config
