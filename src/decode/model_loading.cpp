#include "decode/model_loading.h"

#include <ATen/ATen.h>

#include <cmath>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "amp/autocast.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_file.h"
#include "checkpoint/checkpoint_tools.h"
#include "checkpoint/run_metadata.h"
#include "checkpoint/tensor_groups.h"
#include "decode/language_prefixes.h"
#include "decode/stored_model.h"
#include "model/initialization.h"
#include "util/error.h"
#include "util/log.h"
#include "util/shape.h"
#include "util/timer.h"

namespace nmt::decode {
namespace {

using checkpoint::TensorGroup;

/// Copies the tensors of `group` into the model's parameters, checking names and shapes.
void load_parameters(model::Transformer& model, const checkpoint::CheckpointData& data,
                     TensorGroup group, const std::string& name) {
  at::NoGradGuard no_grad;
  for (const auto& item : model->named_parameters()) {
    const at::Tensor* saved = checkpoint::find_tensor(data, group, item.key());
    const std::string key = checkpoint::tensor_name(group, item.key());
    NMT_CHECK(saved != nullptr, CheckpointError, "{}: tensor {} is missing", name, key);
    NMT_CHECK(saved->sizes() == item.value().sizes(), CheckpointError,
              "{}: tensor {} has shape {}, the model built from the stored config expects {}", name,
              key, shape_string(saved->sizes()), shape_string(item.value().sizes()));
    item.value().copy_(*saved);
  }
}

void log_loaded(const LoadedModel& m, const TranslateOptions& options, TensorGroup weights,
                bool joint, const at::Device& device, double seconds) {
  log::info(
      "translate", "loaded {}{}{} in {:.2f} s: {} parameters, vocabulary {}{}, on {}{}", m.name,
      m.files.size() > 1 ? fmt::format(" (average of the newest {})", m.files.size()) : "",
      weights == TensorGroup::kEma ? ", moving-average weights" : "", seconds,
      m.model->parameter_count(), m.src_vocab.size(),
      joint ? std::string(" (joint)") : fmt::format("+{}", m.tgt_vocab.size()), device.str(),
      options.amp != amp::AmpMode::kOff ? fmt::format(", autocast {}", amp::mode_name(options.amp))
                                        : std::string());
}

/// The model of `given` (a checkpoint file or run directory).
LoadedModel load_model(const std::string& given, const TranslateOptions& options,
                       const at::Device& device, const ModelConfigReader& read_config) {
  LoadedModel m;
  m.files = checkpoint::model_checkpoints(given, options.average);
  m.name = m.files.back().string();
  const auto start = Clock::now();
  // The newest file holds the vocabulary and the config (which averaging drops) and says
  // whether there is a moving average to use; its optimizer state is never held.
  StoredWeights stored = load_stored_weights(m.files.back(), options.weights);
  const checkpoint::CheckpointData& newest = stored.data;
  const TensorGroup weights = stored.group;
  const checkpoint::RunMetadata meta = checkpoint::RunMetadata::parse(newest.metadata, m.name);
  NMT_CHECK(!meta.config.empty(), CheckpointError, "{}: no metadata key \"{}\"", m.name,
            checkpoint::meta_key::kConfig);
  m.src_vocab = stored_vocabulary(newest, checkpoint::vocabulary_file::kSource, m.name);
  m.tgt_vocab = meta.vocab_joint
                    ? m.src_vocab
                    : stored_vocabulary(newest, checkpoint::vocabulary_file::kTarget, m.name);
  const model::ModelOptions model_options = read_config(meta.config, m.name);
  m.ids = {model::decoder_start_id(model_options.decoder_start, m.tgt_vocab.bos_id(),
                                   m.tgt_vocab.eos_id(), m.tgt_vocab.pad_id()),
           m.tgt_vocab.bos_id(), m.tgt_vocab.eos_id(), m.tgt_vocab.pad_id()};
  LanguagePrefixes languages = language_prefixes(meta, options, m.src_vocab, m.tgt_vocab, m.name);
  m.prefix = std::move(languages.source);
  m.ids.forced_prefix = std::move(languages.target);
  {
    // Every parameter is copied in below (load_parameters finds each or throws): drawing
    // initial values first would be seconds of a large model's start-up for nothing.
    const model::SkipInitialization skip;
    m.model = model::Transformer(model_options, m.src_vocab.size(), m.tgt_vocab.size(),
                                 m.src_vocab.pad_id());
  }
  // On a GPU the values go from the mapped file straight into the device's memory: the host
  // never holds the weights (a node's ranks decoding a corpus share the file's page cache).
  if (!device.is_cpu()) model::allocate_parameters_on(*m.model, device);
  if (m.files.size() > 1)
    load_parameters(m.model, checkpoint::average_checkpoints(m.files, weights), weights, m.name);
  else
    load_parameters(m.model, newest, weights, m.name);
  stored = {};  // the file's pages are let go before the packed copies of the weights are made
  m.model->eval();
  m.model->to(device);
  // Decoding on the CPU in float32 computes its products with prepacked weights (about 1.1x
  // to 1.5x per product at a step's row counts; model/packed_linear.h).
  if (device.is_cpu() && options.amp == amp::AmpMode::kOff) m.model->pack_weights();
  m.load_seconds = seconds_since(start);
  log_loaded(m, options, weights, meta.vocab_joint, device, m.load_seconds);
  return m;
}

/// Throws ConfigError naming both models when `other` does not translate as `first` does.
void check_ensemble_member(const LoadedModel& first, const LoadedModel& other) {
  const auto refuse_unless = [&](bool same, const std::string& what) {
    NMT_CHECK(same, ConfigError, "{} and {} cannot decode as an ensemble: {}", first.name,
              other.name, what);
  };
  for (const auto& [side, a, b] : {std::tuple{"source", &first.src_vocab, &other.src_vocab},
                                   std::tuple{"target", &first.tgt_vocab, &other.tgt_vocab}})
    refuse_unless(a->serialized() == b->serialized(),
                  fmt::format("the {} vocabularies (the SentencePiece models stored in the "
                              "checkpoints) differ; an ensemble needs one vocabulary",
                              side));
  refuse_unless(first.ids.start == other.ids.start,
                fmt::format("their decoder start tokens differ ({} and {})", first.ids.start,
                            other.ids.start));
  refuse_unless(first.prefix == other.prefix && first.ids.forced_prefix == other.ids.forced_prefix,
                "they put other language codes first for --src-lang and --tgt-lang");
}

}  // namespace

void check_translate_options(const TranslateOptions& options) {
  validate(options.search);
  NMT_CHECK(options.max_tokens >= 1, ConfigError, "max_tokens: expected an integer >= 1, found {}",
            options.max_tokens);
  NMT_CHECK(options.average >= 0, ConfigError, "average: expected an integer >= 0, found {}",
            options.average);
  NMT_CHECK(!options.checkpoints.empty(), ConfigError,
            "no checkpoint given (a checkpoint file or run directory)");
  const std::vector<double>& weights = options.ensemble_weights;
  NMT_CHECK(weights.empty() || weights.size() == options.checkpoints.size(), ConfigError,
            "--ensemble-weights: expected one weight per checkpoint ({}), found {}",
            options.checkpoints.size(), weights.size());
  for (const double w : weights)
    NMT_CHECK(std::isfinite(w) && w > 0, ConfigError,
              "--ensemble-weights: expected numbers > 0, found {}", w);
}

at::Device pick_device(DeviceChoice choice, int64_t cuda_index) {
  const bool has_cuda = at::hasCUDA();
  switch (choice) {
    case DeviceChoice::kCpu:
      return at::Device(at::kCPU);
    case DeviceChoice::kCuda:
      NMT_CHECK(has_cuda, DeviceError,
                "--device cuda: no CUDA device is visible to this process (or LibTorch is a CPU "
                "build); use --device cpu");
      return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(cuda_index));
    case DeviceChoice::kAuto:
      break;
  }
  return has_cuda ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(cuda_index))
                  : at::Device(at::kCPU);
}

std::vector<LoadedModel> load_models(const TranslateOptions& options, const at::Device& device,
                                     const ModelConfigReader& read_config) {
  std::vector<LoadedModel> models;
  for (const std::string& given : options.checkpoints) {
    models.push_back(load_model(given, options, device, read_config));
    if (models.size() > 1) check_ensemble_member(models.front(), models.back());
  }
  return models;
}

}  // namespace nmt::decode
