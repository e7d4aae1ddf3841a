#include "checkpoint/legacy_attention.h"

#include <array>
#include <map>
#include <string>
#include <vector>
#include <optional>
#include <tuple>

#include <ATen/ATen.h>

#include "util/error.h"
#include "util/shape.h"

namespace nmt::checkpoint {
namespace {

namespace proj = attention_projection;

/// A legacy projection tensor's name, taken apart:
/// "<head><attention>.<part>.<kind>", e.g. "optim.exp_avg.decoder_layers.0." "cross_attn"
/// ".k_proj" ".weight".
struct LegacyName {
  std::string head;       ///< everything before the attention module's name
  bool self = false;      ///< self-attention (else cross-attention)
  int part = 0;           ///< 0 q, 1 k, 2 v
  std::string kind;       ///< "weight" or "bias"
  /// Names the group of parts that fuse together.
  std::tuple<std::string, bool, std::string> key() const { return {head, self, kind}; }
};

/// The name taken apart, or nothing when it is not a legacy projection.
std::optional<LegacyName> parse(std::string_view name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::string_view kind = name.substr(dot + 1);
  const std::string_view rest = name.substr(0, dot);
  const size_t part_dot = rest.rfind('.');
  if (part_dot == std::string_view::npos) return std::nullopt;
  const std::string_view part = rest.substr(part_dot + 1);
  const std::string_view module = rest.substr(0, part_dot);
  LegacyName out;
  if (part == proj::kQuery) out.part = 0;
  else if (part == proj::kLegacyKey) out.part = 1;
  else if (part == proj::kLegacyValue) out.part = 2;
  else return std::nullopt;
  const auto ends_with = [&](std::string_view suffix) {
    return module.size() >= suffix.size() &&
           module.substr(module.size() - suffix.size()) == suffix &&
           (module.size() == suffix.size() || module[module.size() - suffix.size() - 1] == '.');
  };
  if (ends_with(proj::kSelfAttention)) out.self = true;
  else if (ends_with(proj::kCrossAttention)) out.self = false;
  else return std::nullopt;
  // A current cross-attention's q_proj has no k_proj/v_proj siblings: the caller tells them
  // apart by whether the group has parts 1 and 2.
  out.head = std::string(module.substr(0, module.size() - (out.self ? proj::kSelfAttention
                                                                    : proj::kCrossAttention)
                                                                 .size()));
  out.kind = std::string(kind);
  return out;
}

std::string fused_name(const LegacyName& n) {
  std::string out = n.head;
  out += n.self ? proj::kSelfAttention : proj::kCrossAttention;
  out += '.';
  out += n.self ? proj::kQueryKeyValue : proj::kKeyValue;
  out += '.';
  out += n.kind;
  return out;
}

/// Rows concatenated; a 0-dim tensor (Adam's step count, the same for every part) once.
at::Tensor fuse(const std::vector<const at::Tensor*>& parts, const std::string& where,
                const std::string& name) {
  const at::Tensor& first = *parts.front();
  for (const at::Tensor* p : parts) {
    NMT_CHECK(p->sizes() == first.sizes() && p->scalar_type() == first.scalar_type(),
              CheckpointError, "{}: the parts fused into {} differ: shape {} and {}", where, name,
              shape_string(first.sizes()), shape_string(p->sizes()));
  }
  if (first.dim() == 0) return first;
  std::vector<at::Tensor> list;
  for (const at::Tensor* p : parts) list.push_back(*p);
  return at::cat(list, 0);
}

}  // namespace

int64_t fuse_legacy_attention(NamedTensors& tensors, const std::string& where) {
  // Which tensor is which part of which group, by index.
  using Key = std::tuple<std::string, bool, std::string>;
  std::map<Key, std::array<std::optional<size_t>, 3>> groups;
  std::vector<std::optional<LegacyName>> parsed(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    parsed[i] = parse(tensors[i].first);
    if (parsed[i]) groups[parsed[i]->key()][parsed[i]->part] = i;
  }
  NamedTensors out;
  out.reserve(tensors.size());
  int64_t removed = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::optional<LegacyName>& n = parsed[i];
    const auto& parts = n ? groups.at(n->key()) : std::array<std::optional<size_t>, 3>{};
    // Not a projection, or a current cross-attention q_proj (no legacy k/v beside it).
    if (!n || (!n->self && !parts[1] && !parts[2])) {
      out.push_back(std::move(tensors[i]));
      continue;
    }
    const int first = n->self ? 0 : 1;  // the part whose place the fused tensor takes
    if (n->part < first) {              // cross-attention's q_proj stays as it is
      out.push_back(std::move(tensors[i]));
      continue;
    }
    const std::string name = fused_name(*n);
    std::vector<const at::Tensor*> fused_parts;
    for (int p = first; p < 3; ++p) {
      NMT_CHECK(parts[p].has_value(), CheckpointError,
                "{}: {} lacks its part {} (a checkpoint with separate attention projections "
                "needs q_proj, k_proj and v_proj)",
                where, name, p == 0 ? proj::kQuery : p == 1 ? proj::kLegacyKey : proj::kLegacyValue);
      fused_parts.push_back(&tensors[*parts[p]].second);
    }
    if (n->part == first) out.emplace_back(name, fuse(fused_parts, where, name));
    else ++removed;
  }
  // The fused tensors are new; the parts they replace are released with `tensors`.
  tensors = std::move(out);
  return removed;
}

}  // namespace nmt::checkpoint
