#include "hf/hf_import.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/checkpoint_tools.h"
#include "hf/hf_weights.h"
#include "checkpoint/run_metadata.h"
#include "checkpoint/safetensors_io.h"
#include "checkpoint/tensor_groups.h"
#include "config/run_config.h"
#include "config/stored_config.h"
#include "hf/hf_tokenizer.h"
#include "data/lang_tags.h"
#include "data/vocab.h"
#include "hf/hf_import_checks.h"
#include "util/error.h"
#include "util/log.h"
#include "util/output_guard.h"

namespace nmt::hf {
namespace {

/// Metadata keys only an imported checkpoint has.
constexpr const char* kImportedFrom = "imported_from";  ///< the directory, as given
constexpr const char* kHfModelType = "hf_model_type";   ///< config.json's model_type

/// The checkpoint file import-hf may write: never in HF_DIR (nor HF_DIR itself, nor a folder
/// that holds it), by real path; an existing file only with --force, and only a checkpoint that
/// import-hf wrote (its metadata has imported_from): a run's checkpoint, a link or any other
/// file stays. Said before minutes of reading a large model.
void check_output(const HfImportOptions& options) {
  const std::filesystem::path& output = options.output;
  check_output_apart(output, options.hf_dir, "HF_DIR");
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::symlink_status(output, ec);
  if (!std::filesystem::exists(status)) return;
  NMT_CHECK(options.force, ConfigError,
            "{} exists: give another output file, or --force to replace it", output.string());
  bool imported = false;
  if (std::filesystem::is_regular_file(status)) {
    try {
      imported = checkpoint::read_checkpoint_metadata(output).count(kImportedFrom) > 0;
    } catch (const CheckpointError&) {
      // Not a checkpoint: not ours to replace.
    }
  }
  NMT_CHECK(imported, ConfigError,
            "{} exists and is not a checkpoint that import-hf wrote (no metadata key \"{}\"): "
            "--force replaces only those; give another output file, or remove this one yourself",
            output.string(), kImportedFrom);
}

/// The run config a fine-tuning config starts from: the directory's architecture, its
/// vocabulary's shape, and the directory as where the parameters came from.
config::RunConfig stored_config(const HfModelConfig& model,
                                const data::Vocabularies& vocab, const std::filesystem::path& dir) {
  config::RunConfig c;
  c.model = model.model;
  c.data.joint_vocab = vocab.joint;
  c.data.vocab_size = std::clamp<int64_t>(vocab.src.size(), 16, int64_t{1} << 20);
  // Sentences of max_len tokens and two more (bos/eos) must fit the positions, as training checks.
  c.data.max_len = std::min(c.data.max_len, model.model.max_positions - 2);
  c.train.init_from = std::filesystem::absolute(dir).lexically_normal().string();
  return c;
}

/// The dtypes of the weights as stored (import-hf keeps them): by safetensors name, counted.
struct WeightDtypes {
  std::map<std::string, int64_t> counts;  ///< "F16" -> tensors
  std::string summary;                    ///< the one dtype, or "mixed"
  std::string described;                  ///< for the log: "F16", "mixed (120 F16, 1 F32)"
};

WeightDtypes weight_dtypes(const checkpoint::NamedTensors& tensors) {
  WeightDtypes out;
  for (const auto& [name, tensor] : tensors)
    ++out.counts[std::string(checkpoint::safetensors_dtype_name(tensor))];
  out.summary = out.counts.size() == 1 ? out.counts.begin()->first : "mixed";
  out.described = out.summary;
  if (out.counts.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [dtype, count] : out.counts)
      parts.push_back(fmt::format("{} {}", count, dtype));
    out.described += fmt::format(" ({})", fmt::join(parts, ", "));
  }
  return out;
}

}  // namespace

ImportSummary import_hf_model(const HfImportOptions& options) {
  using checkpoint::TensorGroup;
  const std::filesystem::path& hf_dir = options.hf_dir;
  const std::filesystem::path& output = options.output;
  check_output(options);
  // Everything is read and checked before anything is written; config.json and the tokenizer
  // before the weights, which may take minutes to read.
  HfModel model;
  model.config = read_hf_config(hf_dir);
  check_config_bounds(model.config, hf_dir);
  const HfTokenizerModel tokenizer_model{
      std::string(hf_model_type_name(model.config.type)), model.config.tokenizer_class,
      model.config.src_vocab_size, model.config.tgt_vocab_size};
  HfTokenizer tokenizer = load_hf_tokenizer(hf_dir, tokenizer_model);
  const data::Vocabularies& vocab = tokenizer.vocab;
  check_ids(model.config, vocab, hf_dir);
  warn_unreproduced(model.config, hf_dir);
  model.tensors = read_hf_weights(hf_dir, model.config);
  const WeightDtypes dtypes = weight_dtypes(model.tensors);

  const config::RunConfig config = stored_config(model.config, vocab, hf_dir);
  checkpoint::RunMetadata meta;
  meta.config = config::to_yaml(config, /*with_docs=*/false);
  meta.config_hash = config::config_hash(config);
  meta.vocab_fingerprint = data::vocabularies_fingerprint(vocab);
  meta.vocab_joint = vocab.joint;
  meta.languages = data::vocabulary_languages(vocab.src);
  std::sort(meta.languages.begin(), meta.languages.end());
  meta.target_lang_tags = !meta.languages.empty();

  checkpoint::CheckpointData data;
  for (auto& [name, tensor] : model.tensors)
    checkpoint::add_tensor(data, TensorGroup::kModel, name, std::move(tensor));
  namespace file = checkpoint::vocabulary_file;
  checkpoint::add_tensor(data, TensorGroup::kVocabulary, file::kSource,
                         checkpoint::bytes_tensor(vocab.src.serialized()));
  if (!vocab.joint)
    checkpoint::add_tensor(data, TensorGroup::kVocabulary, file::kTarget,
                           checkpoint::bytes_tensor(vocab.tgt.serialized()));
  data.metadata = meta.to_map();
  const std::string type(hf_model_type_name(model.config.type));
  data.metadata[kImportedFrom] = hf_dir.string();
  data.metadata[kHfModelType] = type;

  if (output.has_parent_path()) std::filesystem::create_directories(output.parent_path());
  checkpoint::save_checkpoint(output, data);

  ImportSummary summary;
  summary.output = output;
  summary.model_type = type;
  summary.tokenizer = std::string(data::hf_tokenizer_name(tokenizer.kind));
  summary.parameters = checkpoint::model_parameter_count(data);
  summary.dtype = dtypes.summary;
  summary.dtypes = dtypes.counts;
  summary.src_vocab_size = vocab.src.size();
  summary.tgt_vocab_size = vocab.tgt.size();
  summary.joint_vocab = vocab.joint;
  summary.languages = meta.languages;
  summary.model_yaml = config::model_section_yaml(config);
  log::info(
      "ckpt",
      "imported {} ({} model, {} tokenizer{}) into {}: {} parameters stored as {} "
      "(fine-tuning trains them in F32), vocabulary {}{}",
      hf_dir.string(), type, summary.tokenizer,
      summary.languages.empty() ? std::string()
                                : fmt::format(", {} language codes", summary.languages.size()),
      output.string(), summary.parameters, dtypes.described, summary.src_vocab_size,
      summary.joint_vocab ? std::string(" (joint)") : fmt::format("+{}", summary.tgt_vocab_size));
  return summary;
}

std::string import_summary_json(const ImportSummary& summary) {
  nlohmann::ordered_json j;
  j["output"] = summary.output.string();
  j["model_type"] = summary.model_type;
  j["tokenizer"] = summary.tokenizer;
  j["parameters"] = summary.parameters;
  j["dtype"] = summary.dtype;
  j["dtypes"] = summary.dtypes;
  j["src_vocab_size"] = summary.src_vocab_size;
  j["tgt_vocab_size"] = summary.tgt_vocab_size;
  j["joint_vocab"] = summary.joint_vocab;
  j["languages"] = summary.languages;
  j["model_yaml"] = summary.model_yaml;
  return j.dump(2) + "\n";
}

}  // namespace nmt::hf
