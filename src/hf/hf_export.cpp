#include "hf/hf_export.h"

#include <ATen/ATen.h>

#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_file.h"
#include "checkpoint/checkpoint_tools.h"
#include "hf/hf_config_writer.h"
#include "hf/hf_weights.h"
#include "checkpoint/run_metadata.h"
#include "checkpoint/tensor_groups.h"
#include "config/stored_config.h"
#include "hf/hf_tokenizer_writer.h"
#include "data/vocab.h"
#include "decode/search_options.h"
#include "decode/stored_model.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/output_guard.h"

namespace nmt::hf {
namespace {

using checkpoint::TensorGroup;
using Json = nlohmann::ordered_json;

/// generation_config.json: what transformers' generate needs to search as nmt-translate does.
/// Mapped exactly: the decoder start, never generating pad or bos (suppress_tokens, as our
/// search), eos forced at the length limit (forced_eos_token_id at max_length - 1, counting the
/// start token: our cap of max_positions - 1 tokens, then eos), the beam size. Not mappable:
/// our limit of max_len_a * source tokens + max_len_b per sentence (transformers has one
/// max_length or max_new_tokens per call), and our length penalty ((5 + |Y|) / 6)^alpha of Wu
/// et al. (transformers divides beam scores by |Y|^length_penalty); length_penalty is left at
/// transformers' default.
Json generation_config(const HfModelConfig& c) {
  const decode::SearchOptions defaults;
  Json j;
  j["decoder_start_token_id"] = c.decoder_start_id;
  if (c.bos_id >= 0) j["bos_token_id"] = c.bos_id;
  j["eos_token_id"] = c.eos_id;
  j["pad_token_id"] = c.pad_id;
  j["forced_eos_token_id"] = c.eos_id;
  std::vector<int64_t> suppress = {c.pad_id};
  if (c.bos_id >= 0 && c.bos_id != c.eos_id && c.bos_id != c.pad_id) suppress.push_back(c.bos_id);
  j["suppress_tokens"] = suppress;
  j["num_beams"] = defaults.beam;
  j["max_length"] = c.model.max_positions + 1;
  j["do_sample"] = false;
  return j;
}

/// A folder beside `output` that is removed unless committed (renamed to `output`).
class StagingDir {
 public:
  explicit StagingDir(std::filesystem::path output)
      : output_(std::move(output)), path_(temp_path_for(output_)) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~StagingDir() {
    std::error_code ignored;
    if (!committed_) std::filesystem::remove_all(path_, ignored);
  }
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  /// Replaces `output` (when force allowed it to exist) with the staged folder. Checked again
  /// just before the delete: the export took minutes, and what sits at `output` now may not be
  /// what was checked at the start.
  void commit(std::string_view marker) {
    check_replaceable_dir(output_, marker, "export-hf", /*force=*/true);
    std::filesystem::remove_all(output_);
    std::filesystem::rename(path_, output_);
    committed_ = true;
  }

 private:
  std::filesystem::path output_;
  std::filesystem::path path_;
  bool committed_ = false;
};

/// `given` as a folder that can be replaced: absolute, normalized ("out/", "out/." and "out"
/// are one folder; staged beside it, not inside). A folder that holds the working directory
/// ("." or "..", or "/", or a link to one of them) is refused: replacing it would delete what
/// the command runs in.
std::filesystem::path export_folder(const std::filesystem::path& given) {
  std::filesystem::path folder = std::filesystem::absolute(given).lexically_normal();
  if (!folder.has_filename()) folder = folder.parent_path();  // "out/" normalizes to "out/"
  const std::filesystem::path cwd = std::filesystem::current_path();
  NMT_CHECK(!path_within(cwd, folder) && folder.has_relative_path(), ConfigError,
            "{}: the output directory holds the working directory ({}); give a folder of its own",
            given.string(), cwd.string());
  return folder;
}

/// Refuses an output that is or holds a checkpoint file read, or (for a run directory given)
/// is, holds or lies inside the folder they were listed from: replacing it would delete the
/// run's checkpoints. A folder of its own in the run directory (runs/demo/hf) is not read.
void check_apart_from_input(const std::filesystem::path& output, const std::string& given,
                            const std::vector<std::filesystem::path>& checkpoints) {
  for (const std::filesystem::path& file : checkpoints)
    check_output_apart(output, file, "the checkpoint");
  if (std::filesystem::is_directory(given))
    check_output_apart(output, checkpoints.back().parent_path(), "the checkpoint folder");
}

/// config.json's dtype: the floating-point dtype of the tensors written (transformers loads
/// the model in it), or float32 when they differ (each converts to it exactly) or have none.
std::string written_dtype(const checkpoint::NamedTensors& tensors) {
  std::optional<at::ScalarType> dtype;
  for (const auto& [name, tensor] : tensors) {
    if (!at::isFloatingType(tensor.scalar_type())) continue;
    if (dtype && *dtype != tensor.scalar_type()) return "float32";
    dtype = tensor.scalar_type();
  }
  switch (dtype.value_or(at::kFloat)) {
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    case at::kDouble:
      return "float64";
    default:
      return "float32";
  }
}

}  // namespace

HfExportResult export_hf(const HfExportOptions& options) {
  NMT_CHECK(options.average >= 0, ConfigError, "--average: expected an integer >= 0, found {}",
            options.average);
  const std::filesystem::path output = export_folder(options.output);
  NMT_CHECK(options.force || !std::filesystem::exists(std::filesystem::symlink_status(output)),
            ConfigError, "{} exists: give another output directory, or --force to replace it",
            options.output.string());
  HfExportResult result;
  result.checkpoints = checkpoint::model_checkpoints(options.checkpoint, options.average);
  check_apart_from_input(output, options.checkpoint, result.checkpoints);
  check_replaceable_dir(output, kExportMarker, "export-hf", options.force);
  // The newest file: the vocabulary, the config (which averaging drops), the weights used.
  const decode::StoredWeights stored =
      decode::load_stored_weights(result.checkpoints.back(), options.weights);
  const checkpoint::CheckpointData& newest = stored.data;
  const std::string name = result.checkpoints.back().string();
  const TensorGroup group = stored.group;
  result.moving_average = group == TensorGroup::kEma;
  const checkpoint::RunMetadata meta = checkpoint::RunMetadata::parse(newest.metadata, name);
  NMT_CHECK(!meta.config.empty(), CheckpointError, "{}: no metadata key \"{}\"", name,
            checkpoint::meta_key::kConfig);
  data::Vocabularies vocab;
  vocab.joint = meta.vocab_joint;
  vocab.src = decode::stored_vocabulary(newest, checkpoint::vocabulary_file::kSource, name);
  vocab.tgt = meta.vocab_joint
                  ? vocab.src
                  : decode::stored_vocabulary(newest, checkpoint::vocabulary_file::kTarget, name);
  const model::ModelOptions model_options = config::stored_model_options(meta.config, name);

  // Refused before anything is written.
  HfModelConfig hf;
  try {
    hf = hf_config_for(
        model_options, {vocab.src.size(), vocab.tgt.size(), vocab.tgt.pad_id(), vocab.tgt.eos_id(),
                        vocab.tgt.bos_id()});
  } catch (const CheckpointError& e) {
    throw CheckpointError(fmt::format("{}: {}", name, e.what()), e.where());
  }
  result.model_type = std::string(hf_model_type_name(hf.type));

  checkpoint::NamedTensors ours = checkpoint::group_tensors(
      result.checkpoints.size() > 1 ? checkpoint::average_checkpoints(result.checkpoints, group)
                                    : newest,
      group);
  if (hf.model.output_bias && !model_options.output_bias) {
    // MarianMTModel adds final_logits_bias to the logits; zeros add nothing.
    namespace parameter = checkpoint::model_parameter;
    const at::Tensor& embeddings = checkpoint::tensor_at(newest, group, parameter::kSourceTokens);
    ours.emplace_back(std::string(parameter::kOutputBias),
                      at::zeros({hf.tgt_vocab_size}, embeddings.options()));
  }

  StagingDir staging(output);
  checkpoint::CheckpointData weights;
  weights.tensors = to_hf_tensors(ours, hf);
  weights.metadata = {{"format", "pt"}};  // what transformers' save_pretrained writes
  checkpoint::save_checkpoint(staging.path() / "model.safetensors", weights);
  result.files.push_back("model.safetensors");
  auto write_text = [&](const std::string& file, const std::string& text) {
    std::ofstream out(staging.path() / file);
    out << text;
    out.close();
    NMT_CHECK(out.good(), CheckpointError, "{}: cannot write the file",
              (staging.path() / file).string());
    result.files.push_back(file);
  };
  auto write_json = [&](const std::string& file, const Json& json) {
    write_text(file, json.dump(2) + "\n");
  };
  write_json("config.json", hf_config_json(hf, written_dtype(weights.tensors)));
  write_json("generation_config.json", generation_config(hf));
  for (std::string& file :
       write_hf_tokenizer(vocab, staging.path(), model_options.max_positions))
    result.files.push_back(std::move(file));
  write_text(kExportMarker,
             "written by nmt-ckpt export-hf, whose --force replaces only a directory that holds "
             "this file\n");
  staging.commit(kExportMarker);
  return result;
}

}  // namespace nmt::hf
