#pragma once
// The tensors of a transformers MarianMT or M2M100 model and ours, both ways. Each of our model
// parameters (names within the model group, tensor_layout.h) is made of one or more transformers
// tensors stacked by rows: the fused attention projections (qkv_proj = q, k, v;
// cross-attention kv_proj = k, v), the rest one to one. Tied tables have several transformers
// names (model.shared.weight, model.encoder.embed_tokens.weight, ..., lm_head.weight): reading
// takes the first present, as transformers ties them on load; writing writes the first.
// The sinusoidal position tables transformers may store (embed_positions) are a function of
// the config and are not read.
//
// Reading a directory's files (model.safetensors, or the shards of
// model.safetensors.index.json): hf/hf_weight_files.h.

#include <filesystem>
#include <string>
#include <vector>

#include "hf/hf_config.h"
#include "checkpoint/tensor_layout.h"

namespace nmt::hf {

/// One of our model parameters and the transformers tensors it is made of.
struct HfTensorSource {
  std::string
      name;  ///< ours, within the model group ("encoder_layers.0.self_attn.qkv_proj.weight")
  /// Row blocks, concatenated in order (dim 0); each lists the transformers names that hold
  /// that block, preferred first.
  std::vector<std::vector<std::string>> parts;
  /// The shape of each block in transformers (final_logits_bias: [1, n]), as config.json
  /// implies it (d_model, ffn dims, vocabulary sizes).
  std::vector<int64_t> block_shape;
  bool row_vector = false;  ///< ours [n], transformers' [1, n] (final_logits_bias)
  /// Absent: zeros (transformers ignores a missing final_logits_bias and loads zeros).
  bool zeros_when_missing = false;
};

/// Every parameter of the model a config describes, in our module order, with its sources.
std::vector<HfTensorSource> hf_tensor_sources(const HfModelConfig& config);

/// Our model parameters from a transformers state dict (dtypes kept). Throws CheckpointError,
/// naming `origin`, for a missing tensor (but final_logits_bias, zeros as in transformers), a
/// tensor of another shape than the config implies (named, with both shapes), or a tensor
/// left over (one the config does not explain, e.g. layernorm_embedding's).
checkpoint::NamedTensors from_hf_tensors(const checkpoint::NamedTensors& hf, const HfModelConfig& config,
                             const std::string& origin);

/// The transformers state dict of our model parameters (tied tables once, under their first
/// name). Throws CheckpointError for a missing parameter.
checkpoint::NamedTensors to_hf_tensors(const checkpoint::NamedTensors& ours, const HfModelConfig& config);

/// A transformers model directory read as ours.
struct HfModel {
  HfModelConfig config;  ///< from config.json
  checkpoint::NamedTensors tensors;  ///< our model parameters, names within the model group
};

/// Our model parameters from dir's safetensors weights, for the model `config` describes
/// (import-hf reads config.json and checks it and the tokenizer before these). Throws
/// CheckpointError naming the file.
checkpoint::NamedTensors read_hf_weights(const std::filesystem::path& dir, const HfModelConfig& config);

/// Reads dir/config.json and its safetensors weights. Throws CheckpointError naming the file.
HfModel read_hf_model(const std::filesystem::path& dir);

}  // namespace nmt::hf
