#pragma once
// `nmt-ckpt import-hf`: a Hugging Face transformers model directory (as save_pretrained writes
// it: config.json, model.safetensors, the tokenizer files) written as an nmt-train checkpoint
// that train.init_from, nmt-translate, nmt-ckpt and scripts/export-ctranslate2.py use as they
// use ours. Supported: model_type marian (MarianTokenizer) and m2m_100 (M2M100Tokenizer or
// NllbTokenizer); what they compute and we do not is refused, naming the file and key
// (hf/hf_config.h, hf/hf_tokenizer.h), and nothing is written.
//
// The checkpoint holds:
//   model.*        the weights as the directory stores them (dtypes kept, F16 and BF16 too:
//                  the summary says which; fine-tuning and nmt-translate copy them into F32
//                  parameters; hf/hf_weights.h)
//   vocabulary.*   the tokenizer's two sides, each a SentencePiece model with the tokenizer's ids
//                  (Vocab::serialized(); one tensor when both sides are alike)
//   metadata       step 0; "config": a run config whose model section is the directory's
//                  architecture (what a fine-tuning config must repeat) and whose
//                  train.init_from names the directory; the vocabulary's fingerprint; for a
//                  vocabulary with language codes, lang_tags "target" and "languages" (the
//                  codes' languages, so nmt-translate asks for --tgt-lang and, for M2M100 and
//                  NLLB, --src-lang); "imported_from" and "hf_model_type".

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace nmt::hf {

/// What import_hf_model wrote, for nmt-ckpt's JSON answer.
struct ImportSummary {
  std::filesystem::path output;  ///< the checkpoint file
  std::string model_type;        ///< "marian" or "m2m_100"
  std::string tokenizer;         ///< "marian", "m2m100" or "nllb"
  int64_t parameters = 0;        ///< elements over the model's tensors
  std::string dtype;             ///< the weights' dtype as stored ("F32", "F16", "BF16", "mixed")
  std::map<std::string, int64_t> dtypes;  ///< tensors of each dtype stored
  int64_t src_vocab_size = 0;             ///< ids of the source side
  int64_t tgt_vocab_size = 0;             ///< ids of the target side
  bool joint_vocab = true;                ///< one vocabulary tensor for both sides
  std::vector<std::string> languages;     ///< languages with a code; empty: not multilingual
  std::string model_yaml;                 ///< the model section of the stored config, as YAML
};

/// What import_hf_model reads and writes.
struct HfImportOptions {
  std::filesystem::path hf_dir;  ///< the transformers model directory
  std::filesystem::path output;  ///< the checkpoint file to write
  bool force = false;            ///< replace `output` when import_hf_model wrote it
};

/// Reads the directory `options.hf_dir` and writes `options.output` (atomically; its folder is
/// created). Throws ConfigError when the output is in (or is, or holds) hf_dir by real path,
/// or exists and `force` is not set, or is not a checkpoint that import-hf wrote (metadata
/// imported_from); CheckpointError or DataError naming the file and key of what cannot be
/// imported; each before anything is written.
ImportSummary import_hf_model(const HfImportOptions& options);

/// The summary as one JSON object (nmt-ckpt import-hf's standard output).
std::string import_summary_json(const ImportSummary& summary);

}  // namespace nmt::hf
