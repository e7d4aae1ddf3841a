#include "job/fine_tune.h"

#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include <ATen/ATen.h>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/run_metadata.h"
#include "checkpoint/tensor_groups.h"
#include "data/token_table.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/log.h"

namespace nmt::job {
namespace {

std::string read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  NMT_CHECK(in.good(), ConfigError, "{}: cannot read", file.string());
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// The bytes of a SentencePiece model kept in a checkpoint (checkpoint::vocabulary_file).
std::string model_bytes(const LoadedCheckpoint& source, std::string_view file) {
  using checkpoint::TensorGroup;
  const at::Tensor* t = checkpoint::find_tensor(source.data, TensorGroup::kVocabulary, file);
  NMT_CHECK(t != nullptr, CheckpointError, "{}: no tensor {}: not a checkpoint of nmt-train",
            source.path.string(), checkpoint::tensor_name(TensorGroup::kVocabulary, file));
  return checkpoint::tensor_bytes(*t);
}

/// Writes `bytes` to `file` unless it holds them already; another content is an error.
void install_file(const std::filesystem::path& file, const std::string& bytes,
                  const std::string& origin) {
  if (std::filesystem::exists(file)) {
    NMT_CHECK(read_bytes(file) == bytes, ConfigError,
              "train.init_from: {} already holds another SentencePiece model than {}: that run "
              "directory belongs to another vocabulary (use a new run_dir)",
              file.string(), origin);
    return;
  }
  std::filesystem::create_directories(file.parent_path());
  write_file_atomically(file, bytes);
}

/// Whether a checkpoint name is one of the vocabulary tensors fine-tuning reads first.
bool is_vocabulary_tensor(std::string_view name) {
  using checkpoint::TensorGroup;
  return name == checkpoint::tensor_name(TensorGroup::kVocabulary,
                                         checkpoint::vocabulary_file::kSource) ||
         name == checkpoint::tensor_name(TensorGroup::kVocabulary,
                                         checkpoint::vocabulary_file::kTarget);
}

}  // namespace

std::optional<LoadedCheckpoint> load_init_checkpoint(const config::RunConfig& config) {
  const std::string& given = config.train.init_from;
  if (given.empty()) return std::nullopt;
  const std::filesystem::path file = checkpoint::model_checkpoints(given).front();
  LoadedCheckpoint source{file, checkpoint::read_checkpoint_tensors(file, is_vocabulary_tensor)};
  const std::string name = file.string();
  const checkpoint::RunMetadata meta = checkpoint::RunMetadata::parse(source.data.metadata, name);
  NMT_CHECK(!meta.config.empty(), CheckpointError,
            "train.init_from {}: no metadata key \"config\": not a checkpoint of nmt-train", name);
  const config::RunConfig trained = config::parse_stored_config(meta.config, name);
  // The parameters fit only the network they were trained in: a key that changes it (an
  // activation, the norm placement, ...) would go unnoticed by the shape checks.
  if (const auto difference = config::model_difference(config, trained))
    NMT_THROW(ConfigError, "train.init_from {}: {}; set it as the checkpoint has it", name,
              *difference);
  const data::DataOptions& here = config.data;
  // An imported Hugging Face vocabulary is fixed by its model, whatever data.vocab_size says.
  const bool imported_vocab =
      data::is_serialized_hf_vocab(model_bytes(source, checkpoint::vocabulary_file::kSource));
  NMT_CHECK(here.joint_vocab == meta.vocab_joint, ConfigError,
            "data.joint_vocab is {} but train.init_from {} was trained with {} vocabularies",
            here.joint_vocab ? "true" : "false", name, meta.vocab_joint ? "one joint" : "separate");
  if (!here.spm_model.empty()) {
    NMT_CHECK(
        read_bytes(here.spm_model) == model_bytes(source, checkpoint::vocabulary_file::kSource),
        ConfigError,
        "data.spm_model {} is not the vocabulary train.init_from {} was trained with; "
        "leave data.spm_model unset to use the checkpoint's",
        here.spm_model, name);
  } else if (trained.data.spm_model.empty() && !imported_vocab) {
    NMT_CHECK(here.vocab_size == trained.data.vocab_size, ConfigError,
              "data.vocab_size is {} but train.init_from {} was trained with data.vocab_size {}; "
              "the checkpoint's vocabulary is reused, so set data.vocab_size: {}",
              here.vocab_size, name, trained.data.vocab_size, trained.data.vocab_size);
  }
  log::info("train",
            "fine-tuning from {} (step {}): its parameters and vocabulary; optimizer, "
            "schedule and data position start anew",
            name, meta.step);
  return source;
}

checkpoint::CheckpointData load_init_weights(const LoadedCheckpoint& source) {
  // The optimizer's state (twice the parameters) and the EMA are read and hashed, never held;
  // the weights are views of the file mapped, one copy for the node's ranks in the page cache.
  checkpoint::CheckpointData weights =
      checkpoint::map_checkpoint(source.path, [](std::string_view name) {
        return checkpoint::in_group(checkpoint::TensorGroup::kModel, name);
      });
  NMT_CHECK(weights.metadata == source.data.metadata, CheckpointError,
            "train.init_from {}: the file changed since the run read its vocabulary (another "
            "run saving there?); start the run again",
            source.path.string());
  return weights;
}

void install_init_vocabulary(const LoadedCheckpoint& source, const config::RunConfig& config) {
  if (!config.data.spm_model.empty()) return;  // checked equal by load_init_checkpoint
  const std::filesystem::path dir = std::filesystem::path(config.run_dir) / "vocab";
  const std::string origin = source.path.string();
  if (config.data.joint_vocab) {
    install_file(dir / "joint.model", model_bytes(source, checkpoint::vocabulary_file::kSource),
                 origin);
  } else {
    install_file(dir / "src.model", model_bytes(source, checkpoint::vocabulary_file::kSource),
                 origin);
    install_file(dir / "tgt.model", model_bytes(source, checkpoint::vocabulary_file::kTarget),
                 origin);
  }
}

void prepare_init_vocabulary(const config::RunConfig& config) {
  if (config.train.init_from.empty()) return;
  const checkpoint::CheckpointDir own(std::filesystem::path(config.run_dir) / "checkpoints",
                                      config.checkpoint);
  if (!own.list().empty()) return;  // the run resumes from its own checkpoints
  if (const auto source = load_init_checkpoint(config)) install_init_vocabulary(*source, config);
}

}  // namespace nmt::job
