#pragma once
// The names of the tensors in a checkpoint, in one place: what RunMetadata is for the metadata,
// this is for the tensors. A checkpoint's tensors fall into groups; each tensor is named
// "<group prefix><name within the group>":
//
//   group       prefix    names within the group
//   model       model.    <parameter>                     the trained parameters (module paths)
//   ema         ema.      <parameter>                     their moving average (train.ema_decay)
//   optimizer   optim.    <slot>.<parameter>              Adam: slots exp_avg, exp_avg_sq, step
//   scaler      scaler.   scale enabled growth_tracker skipped_total consecutive_skips
//   rng         rng.      <kind>.<rank>                   generator states: kind cpu or cuda
//   vocabulary  vocab.    src_model [tgt_model]           SentencePiece model files (bytes)
//
// Within the model, ema and optimizer groups the attention projections are named as
// attention_projection below says (the model registers its modules by those names).
//
// Components write and read their tensors by names within their group (the optimizer knows
// slots and parameters, not "optim."); checkpoint/tensor_groups.h puts them into a checkpoint
// and takes them out. scripts/export-ctranslate2.py reads the same names from its LAYOUT table,
// and a test compares that table with `nmt-ckpt layout` so the two cannot drift. Adding a
// group: a row in kTensorGroups (and the table above), its writer and its reader.
//
// Header-only and free of ATen functions, so every component that owns a group (amp/, train/)
// can name its tensors without linking the checkpoint library.

#include <array>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace nmt::checkpoint {

/// Named tensors, in order: a checkpoint's contents, or one group's with names within it.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// Looks up a tensor of one group by its name within the group; nullptr when there is none.
/// What a component's load_state reads its group through (tensor_groups.h makes one).
using TensorFinder = std::function<const at::Tensor*(std::string_view)>;

/// The groups of tensors a checkpoint holds.
enum class TensorGroup { kModel, kEma, kOptimizer, kScaler, kRng, kVocabulary };

/// One row of the layout: a group, its name (as `nmt-ckpt layout` prints it), its prefix.
struct TensorGroupInfo {
  TensorGroup group;
  std::string_view name;      ///< "model", "ema", ...
  std::string_view prefix;    ///< "model.", "ema.", ...
  std::string_view contents;  ///< what the group holds, for people
};

/// The layout: every group, in the order writers add them.
inline constexpr std::array<TensorGroupInfo, 6> kTensorGroups{{
    {TensorGroup::kModel, "model", "model.", "the model's parameters, by module path"},
    {TensorGroup::kEma, "ema", "ema.", "moving average of each model parameter"},
    {TensorGroup::kOptimizer, "optimizer", "optim.", "<slot>.<parameter>: Adam moments, steps"},
    {TensorGroup::kScaler, "scaler", "scaler.", "the dynamic loss scaler's state"},
    {TensorGroup::kRng, "rng", "rng.", "<kind>.<rank>: random generator states"},
    {TensorGroup::kVocabulary, "vocabulary", "vocab.", "SentencePiece model files, as bytes"},
}};

/// The layout row of a group.
constexpr const TensorGroupInfo& group_info(TensorGroup group) {
  return kTensorGroups[static_cast<size_t>(group)];
}

/// The prefix of a group's tensor names ("model.", ...).
constexpr std::string_view group_prefix(TensorGroup group) { return group_info(group).prefix; }

/// The checkpoint name of the tensor called `name` within `group`.
inline std::string tensor_name(TensorGroup group, std::string_view name) {
  std::string out(group_prefix(group));
  out += name;
  return out;
}

/// Whether the checkpoint name `full` belongs to `group`.
constexpr bool in_group(TensorGroup group, std::string_view full) {
  return full.substr(0, group_prefix(group).size()) == group_prefix(group);
}

/// The name within `group` of the checkpoint name `full`; `full` must be in the group.
constexpr std::string_view name_in_group(TensorGroup group, std::string_view full) {
  return full.substr(group_prefix(group).size());
}

/// Names within the optimizer group: "<slot>.<parameter>".
namespace optimizer_slot {
inline constexpr std::string_view kExpAvg = "exp_avg";      ///< Adam's first moment
inline constexpr std::string_view kExpAvgSq = "exp_avg_sq";  ///< Adam's second moment
inline constexpr std::string_view kStep = "step";            ///< per-parameter step count
inline constexpr std::array<std::string_view, 3> kAll{kExpAvg, kExpAvgSq, kStep};
/// The name within the optimizer group of `slot` of `parameter`.
inline std::string name(std::string_view slot, std::string_view parameter) {
  std::string out(slot);
  out += '.';
  out += parameter;
  return out;
}
}  // namespace optimizer_slot

/// Names within the scaler group.
namespace scaler_field {
inline constexpr std::string_view kScale = "scale";                 ///< float32[1]
inline constexpr std::string_view kEnabled = "enabled";             ///< uint8[1]: 1 for fp16
inline constexpr std::string_view kGrowthTracker = "growth_tracker";  ///< int32[1]
inline constexpr std::string_view kSkippedTotal = "skipped_total";    ///< int64[1]
inline constexpr std::string_view kConsecutiveSkips = "consecutive_skips";  ///< int64[1]
inline constexpr std::array<std::string_view, 5> kAll{kScale, kEnabled, kGrowthTracker,
                                                      kSkippedTotal, kConsecutiveSkips};
}  // namespace scaler_field

/// Names within the rng group: "<kind>.<rank>".
namespace rng_stream {
/// The name within the rng group of the generator `kind` ("cpu", "cuda": dist/random_state.h)
/// of `rank`.
inline std::string name(std::string_view kind, int64_t rank) {
  return std::string(kind) + '.' + std::to_string(rank);
}
}  // namespace rng_stream

/// Names within the vocabulary group.
namespace vocabulary_file {
inline constexpr std::string_view kSource = "src_model";  ///< the source (or joint) model
inline constexpr std::string_view kTarget = "tgt_model";  ///< the target model, when not joint
}  // namespace vocabulary_file

/// Names of model parameters that code outside the model reads by name (module paths, as the
/// model registers them): the source token embedding, and the logits bias (model.output_bias).
namespace model_parameter {
inline constexpr std::string_view kSourceTokens = "encoder_embed.tokens.weight";  ///< [src, d]
inline constexpr std::string_view kOutputBias = "output_bias";  ///< [tgt]; with model.output_bias
}  // namespace model_parameter

/// Names of the attention projections within a model parameter's module path
/// ("encoder_layers.0.self_attn.qkv_proj.weight"). Self-attention projects queries, keys and
/// values in one [3d, d] matrix (rows q, k, v), cross-attention queries in a [d, d] one and the
/// encoder output's keys and values in one [2d, d] (rows k, v): CTranslate2's layout. Before
/// the fusion (nmt-train up to 7b6366d) every attention had separate [d, d] q_proj, k_proj and
/// v_proj; checkpoint/legacy_attention.h fuses them on load.
namespace attention_projection {
inline constexpr std::string_view kSelfAttention = "self_attn";    ///< module of self-attention
inline constexpr std::string_view kCrossAttention = "cross_attn";  ///< module of cross-attention
inline constexpr std::string_view kQueryKeyValue = "qkv_proj";     ///< self: [3d, d], rows q k v
inline constexpr std::string_view kQuery = "q_proj";               ///< cross: [d, d]
inline constexpr std::string_view kKeyValue = "kv_proj";           ///< cross: [2d, d], rows k v
inline constexpr std::string_view kOutput = "out_proj";            ///< both: [d, d]
inline constexpr std::string_view kLegacyKey = "k_proj";    ///< before the fusion: keys [d, d]
inline constexpr std::string_view kLegacyValue = "v_proj";  ///< before the fusion: values [d, d]
}  // namespace attention_projection

}  // namespace nmt::checkpoint
