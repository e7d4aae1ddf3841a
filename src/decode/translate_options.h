#pragma once
// Options of the Translator (nmt-translate). No torch types, so the command line (config/)
// can fill them without compiling against LibTorch.

#include <cstdint>
#include <string>
#include <vector>

#include "amp/amp_options.h"
#include "decode/search_options.h"

namespace nmt::decode {

/// Where the model runs.
enum class DeviceChoice { kAuto, kCpu, kCuda };

/// Which of a checkpoint's weights translate.
enum class WeightsChoice {
  kAuto,  ///< the moving average ("ema.*", train.ema_decay) when the checkpoint has it, else raw
  kEma,   ///< the moving average; an error when the checkpoint has none
  kRaw,   ///< the trained parameters ("model.*")
};

/// How to load the model and batch the input; every field has a default.
struct TranslateOptions {
  /// Checkpoint files or run directories (their checkpoints/: lowest "selection": best by
  /// train.best_metric, else newest). Several: an ensemble (decode/ensemble.h), which needs
  /// one vocabulary.
  std::vector<std::string> checkpoints;
  /// Each model's relative weight in an ensemble, in the order of checkpoints (> 0,
  /// normalized to sum 1); empty: equal weights.
  std::vector<double> ensemble_weights;
  int64_t average = 0;  ///< > 1: average the newest K checkpoints of each run dir
  WeightsChoice weights = WeightsChoice::kAuto;  ///< trained or moving-average weights
  int64_t max_tokens = 4096;  ///< padded source tokens per batch (sentences x longest)
  DeviceChoice device = DeviceChoice::kAuto;  ///< kAuto: CUDA when available, else CPU
  int64_t cuda_index = 0;                     ///< which GPU runs it (one rank's of several)
  amp::AmpMode amp = amp::AmpMode::kOff;      ///< autocast precision of the forward passes
  int64_t threads = 0;                        ///< CPU intra-op threads; 0: LibTorch's default
  bool with_scores = false;                   ///< output lines are "text\tscore" (normalized score)
  int64_t progress_min_lines = 1000;          ///< inputs this long report progress even when stderr
                                              ///< is not a terminal
  SearchOptions search;                       ///< beam, length penalty, lengths, nbest, caching
  /// Target language of a multilingual model (its `<2xx>` tag goes first in every source; an
  /// imported M2M100 or NLLB model's code starts every output instead); required for one,
  /// refused for any other model. Empty: none.
  std::string tgt_lang;
  /// Source language of a multilingual model whose sources start with their own language's
  /// code (an imported M2M100 or NLLB model); required for one, refused for others.
  std::string src_lang;
};

}  // namespace nmt::decode
