#include "hf/hf_weights.h"

#include <map>
#include <set>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include "hf/hf_weight_files.h"
#include "util/error.h"
#include "util/shape.h"

namespace nmt::hf {

using checkpoint::NamedTensors;

namespace {

namespace names = checkpoint::attention_projection;

/// Collects the sources of one model, with our names and theirs spelled out once, and the
/// shape config.json implies for each transformers tensor.
class SourceList {
 public:
  /// ours.{weight,bias} <- theirs.{weight,bias}: a [rows, cols] weight, a [rows] bias.
  void linear(const std::string& ours, const std::string& theirs, int64_t rows, int64_t cols) {
    add(ours + ".weight", {{theirs + ".weight"}}, {rows, cols});
    add(ours + ".bias", {{theirs + ".bias"}}, {rows});
  }
  /// A LayerNorm's weight and bias, [d] each.
  void norm(const std::string& ours, const std::string& theirs, int64_t d) {
    for (const char* p : {".weight", ".bias"}) add(ours + p, {{theirs + p}}, {d});
  }
  /// ours.{weight,bias} <- theirs_block.{weight,bias} stacked by rows, each block [d, d], [d].
  void fused(const std::string& ours, const std::vector<std::string>& theirs, int64_t d) {
    for (const char* p : {".weight", ".bias"}) {
      std::vector<std::vector<std::string>> parts;
      for (const std::string& block : theirs) parts.push_back({block + p});
      add(ours + p, std::move(parts),
          std::string(p) == ".weight" ? std::vector<int64_t>{d, d} : std::vector<int64_t>{d});
    }
  }
  void add(std::string ours, std::vector<std::vector<std::string>> parts,
           std::vector<int64_t> block_shape, bool row = false) {
    sources_.push_back({std::move(ours), std::move(parts), std::move(block_shape), row,
                        /*zeros_when_missing=*/row});
  }
  std::vector<HfTensorSource> take() { return std::move(sources_); }

 private:
  std::vector<HfTensorSource> sources_;
};

/// The projections and norms of encoder (cross = false) or decoder layer i.
void add_layer(SourceList& list, const model::ModelOptions& m, bool decoder, int64_t i) {
  const std::string ours = fmt::format("{}_layers.{}.", decoder ? "decoder" : "encoder", i);
  const std::string theirs = fmt::format("model.{}.layers.{}.", decoder ? "decoder" : "encoder", i);
  const std::string self = ours + std::string(names::kSelfAttention) + ".";
  const int64_t d = m.d_model;
  list.fused(
      self + std::string(names::kQueryKeyValue),
      {theirs + "self_attn.q_proj", theirs + "self_attn.k_proj", theirs + "self_attn.v_proj"}, d);
  list.linear(self + std::string(names::kOutput), theirs + "self_attn.out_proj", d, d);
  list.norm(ours + "self_attn_norm", theirs + "self_attn_layer_norm", d);
  if (decoder) {
    const std::string cross = ours + std::string(names::kCrossAttention) + ".";
    list.linear(cross + std::string(names::kQuery), theirs + "encoder_attn.q_proj", d, d);
    list.fused(cross + std::string(names::kKeyValue),
               {theirs + "encoder_attn.k_proj", theirs + "encoder_attn.v_proj"}, d);
    list.linear(cross + std::string(names::kOutput), theirs + "encoder_attn.out_proj", d, d);
    list.norm(ours + "cross_attn_norm", theirs + "encoder_attn_layer_norm", d);
  }
  list.linear(ours + "ffn.fc1", theirs + "fc1", m.ffn_dim, d);
  list.linear(ours + "ffn.fc2", theirs + "fc2", d, m.ffn_dim);
  list.norm(ours + "ffn_norm", theirs + "final_layer_norm", d);
}

/// Whether a transformers tensor is a fixed position table (a function of the config).
bool is_position_table(const std::string& name) {
  return name.find(".embed_positions.") != std::string::npos;
}

const at::Tensor* find(const std::map<std::string, const at::Tensor*>& by_name,
                       const std::string& name) {
  const auto it = by_name.find(name);
  return it == by_name.end() ? nullptr : it->second;
}

}  // namespace

std::vector<HfTensorSource> hf_tensor_sources(const HfModelConfig& config) {
  const model::ModelOptions& m = config.model;
  const int64_t d = m.d_model;
  const int64_t src_rows = config.src_vocab_size, tgt_rows = config.tgt_vocab_size;
  SourceList list;
  // Our parameter order (named_parameters): the Transformer's own first, then its modules':
  // embeddings, layers, final norms, output projection.
  // The one row vector, and the one tensor transformers may leave out (MarianMTModel's
  // _keys_to_ignore_on_load_missing).
  if (m.output_bias) list.add("output_bias", {{"final_logits_bias"}}, {1, tgt_rows}, /*row=*/true);
  switch (m.tie_embeddings) {
    case model::TiedEmbeddings::kAll:
      list.add("encoder_embed.tokens.weight",
               {{"model.shared.weight", "model.encoder.embed_tokens.weight",
                 "model.decoder.embed_tokens.weight", "lm_head.weight"}},
               {src_rows, d});
      break;
    case model::TiedEmbeddings::kDecoder:
      list.add("encoder_embed.tokens.weight", {{"model.encoder.embed_tokens.weight"}},
               {src_rows, d});
      list.add("decoder_embed.tokens.weight",
               {{"model.decoder.embed_tokens.weight", "lm_head.weight"}}, {tgt_rows, d});
      break;
    case model::TiedEmbeddings::kNone:
      list.add("encoder_embed.tokens.weight", {{"model.encoder.embed_tokens.weight"}},
               {src_rows, d});
      list.add("decoder_embed.tokens.weight", {{"model.decoder.embed_tokens.weight"}},
               {tgt_rows, d});
      break;
  }
  for (int64_t i = 0; i < m.encoder_layers; ++i) add_layer(list, m, /*decoder=*/false, i);
  for (int64_t i = 0; i < m.decoder_layers; ++i) add_layer(list, m, /*decoder=*/true, i);
  if (m.norm == model::NormPosition::kPre) {
    list.norm("encoder_norm", "model.encoder.layer_norm", d);
    list.norm("decoder_norm", "model.decoder.layer_norm", d);
  }
  if (m.tie_embeddings == model::TiedEmbeddings::kNone)
    list.add("output_projection.weight", {{"lm_head.weight"}}, {tgt_rows, d});
  return list.take();
}

NamedTensors from_hf_tensors(const NamedTensors& hf, const HfModelConfig& config,
                             const std::string& origin) {
  std::map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, tensor] : hf) by_name.emplace(name, &tensor);
  std::set<std::string> used;
  NamedTensors out;
  for (const HfTensorSource& source : hf_tensor_sources(config)) {
    if (source.zeros_when_missing && find(by_name, source.parts[0][0]) == nullptr) {
      // In the weights' dtype, as transformers makes the buffer in the model's.
      at::ScalarType dtype = at::kFloat;
      for (const auto& [name, tensor] : hf)
        if (tensor.is_floating_point()) {
          dtype = tensor.scalar_type();
          break;
        }
      out.emplace_back(source.name, at::zeros({config.tgt_vocab_size}, at::dtype(dtype)));
      continue;
    }
    std::vector<at::Tensor> blocks;
    for (const std::vector<std::string>& aliases : source.parts) {
      const at::Tensor* found = nullptr;
      const std::string* found_name = nullptr;
      for (const std::string& alias : aliases) {
        const at::Tensor* t = find(by_name, alias);
        if (t == nullptr) continue;
        used.insert(alias);
        if (found == nullptr) {
          found = t;
          found_name = &alias;
        }
      }
      NMT_CHECK(found != nullptr, CheckpointError, "{}: no tensor {} (for {} of a {} model)",
                origin, aliases.front(), source.name, hf_model_type_name(config.type));
      // Blocks that agree with each other may still disagree with config.json (d_model 64
      // over 32-wide weights), which would import and compute garbage or fail much later.
      NMT_CHECK(found->sizes() == at::IntArrayRef(source.block_shape), CheckpointError,
                "{}: {} has shape {}, but config.json implies {} (d_model {}, ffn_dim {}, "
                "vocab_size {}, decoder_vocab_size {})",
                origin, *found_name, shape_string(found->sizes()), shape_string(source.block_shape),
                config.model.d_model, config.model.ffn_dim, config.src_vocab_size,
                config.tgt_vocab_size);
      blocks.push_back(*found);
    }
    at::Tensor tensor = blocks.size() == 1 ? blocks[0] : at::cat(blocks, 0);
    if (source.row_vector) tensor = tensor.reshape({-1});
    out.emplace_back(source.name, tensor.contiguous());
  }
  std::vector<std::string> left;
  for (const auto& [name, tensor] : hf) {
    if (!used.count(name) && !is_position_table(name)) left.push_back(name);
  }
  NMT_CHECK(left.empty(), CheckpointError,
            "{}: {} tensor(s) that a {} model as config.json describes does not have, e.g. {}",
            origin, left.size(), hf_model_type_name(config.type), left.empty() ? "" : left[0]);
  return out;
}

NamedTensors to_hf_tensors(const NamedTensors& ours, const HfModelConfig& config) {
  std::map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, tensor] : ours) by_name.emplace(name, &tensor);
  NamedTensors out;
  for (const HfTensorSource& source : hf_tensor_sources(config)) {
    const at::Tensor* tensor = find(by_name, source.name);
    NMT_CHECK(tensor != nullptr, CheckpointError, "no model parameter {} to export", source.name);
    const std::vector<at::Tensor> blocks =
        tensor->chunk(static_cast<int64_t>(source.parts.size()), 0);
    for (size_t i = 0; i < source.parts.size(); ++i) {
      at::Tensor block = source.row_vector ? blocks[i].reshape({1, -1}) : blocks[i];
      out.emplace_back(source.parts[i].front(), block.contiguous());
    }
  }
  return out;
}

NamedTensors read_hf_weights(const std::filesystem::path& dir, const HfModelConfig& config) {
  return from_hf_tensors(read_hf_weight_files(dir), config, dir.string());
}

HfModel read_hf_model(const std::filesystem::path& dir) {
  HfModel model;
  model.config = read_hf_config(dir);
  model.tensors = read_hf_weights(dir, model.config);
  return model;
}

}  // namespace nmt::hf
