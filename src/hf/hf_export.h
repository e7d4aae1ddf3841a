#pragma once
// `nmt-ckpt export-hf`: an nmt-train checkpoint as a Hugging Face transformers model directory,
// which AutoTokenizer.from_pretrained and AutoModelForSeq2SeqLM.from_pretrained load with no
// code of ours:
//
//   config.json             hf/hf_config_writer.h: marian or m2m_100, whichever computes
//                           exactly what our model computes; any other model is refused
//   model.safetensors       the model's tensors in their stored dtype (fp32 for a run of ours,
//                           an import's own; config.json's dtype says which), in transformers'
//                           names (hf/hf_weights.h); a Marian export without our output
//                           bias gets zeros for final_logits_bias
//   generation_config.json  the decoder start, bos, eos and pad ids and our decoding defaults
//                           (hf_export.cpp says what does not map)
//   tokenizer files         hf/hf_tokenizer_writer.h
//   .nmt-export-hf          the marker (kExportMarker) that lets --force replace this export
//
// The checkpoint is picked as nmt-translate picks it (a file, or a run directory's best or
// newest; average > 1 averages the newest K; the moving average or the trained weights).
// Everything is written into a temporary folder beside OUT and renamed at the end, so a
// refusal or a failure leaves no OUT behind. OUT (util/output_guard.h) must not exist, or with
// force be an empty folder or an earlier export; it may never be or hold a checkpoint file
// read, nor (for a run directory given) be, hold or lie inside the folder they are listed from,
// compared by real path. A folder of its own in the run directory (runs/demo/hf) is fine.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "decode/translate_options.h"

namespace nmt::hf {

/// The file export_hf writes into every output directory: --force replaces only a directory
/// that holds it (or an empty one).
inline constexpr const char* kExportMarker = ".nmt-export-hf";

/// What to export, and where.
struct HfExportOptions {
  std::string checkpoint;        ///< a checkpoint file, or a run directory (or its checkpoints/)
  std::filesystem::path output;  ///< the model directory to write; must not exist unless force
  int64_t average = 0;           ///< > 1: the mean of the run's newest `average` checkpoints
  decode::WeightsChoice weights = decode::WeightsChoice::kAuto;  ///< moving average or trained
  bool force = false;  ///< replace `output` when it is empty or an earlier export
};

/// What export_hf wrote.
struct HfExportResult {
  std::string model_type;                          ///< config.json's model_type
  std::vector<std::filesystem::path> checkpoints;  ///< the files exported (averaged when several)
  bool moving_average = false;                     ///< the ema.* weights, not model.*
  std::vector<std::string> files;                  ///< the names written into output
};

/// Writes options.output (see above). Throws CheckpointError (no checkpoint, a model no
/// transformers architecture reproduces: the message names the model.* keys to change),
/// DataError (a vocabulary it cannot write) or ConfigError (an output it may not write).
HfExportResult export_hf(const HfExportOptions& options);

}  // namespace nmt::hf
