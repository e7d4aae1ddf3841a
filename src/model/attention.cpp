#include "model/attention.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <torch/nn/init.h>

#include "checkpoint/tensor_layout.h"
#include "model/fake_quantization.h"
#include "model/few_query_attention.h"
#include "model/initialization.h"
#include "util/error.h"

namespace nmt::model {
namespace {

/// Longest key sequence for which half-precision CPU attention takes the math path.
constexpr int64_t kMathAttentionMaxKeys = 192;

/// Most queries per row for which float32 CPU inference attends with attend_few_queries
/// (model/few_query_attention.h): a decoding step has one (self-attention) or one per beam
/// (cross-attention, grouped).
constexpr int64_t kFewQueries = 16;

}  // namespace

void init_projection(Linear& linear, int64_t blocks) {
  if (!initializing()) return;
  // Row blocks of a contiguous weight are contiguous views: each draws what a separate
  // [out / blocks, in] layer would, so a fused model starts where the split one did.
  for (const at::Tensor& block : linear->weight.chunk(blocks, 0))
    torch::nn::init::xavier_uniform_(block);
  if (linear->bias.defined()) torch::nn::init::zeros_(linear->bias);
}

at::Tensor attention_mask_from_padding(const at::Tensor& pad_mask) {
  TORCH_CHECK(pad_mask.dim() == 2 && pad_mask.scalar_type() == at::kBool,
              "attention mask: expected a bool padding mask [B, S], found ", pad_mask.sizes());
  const at::Tensor all_pad = pad_mask.all(/*dim=*/1, /*keepdim=*/true);
  return at::logical_or(pad_mask.logical_not(), all_pad).view({pad_mask.size(0), 1, 1, -1});
}

MultiheadAttentionImpl::MultiheadAttentionImpl(const MultiheadAttentionOptions& options)
    : options_(options) {
  NMT_CHECK(options.heads() > 0 && options.d_model() % options.heads() == 0, nmt::ConfigError,
            "model.heads: expected a divisor of model.d_model = {}, found {}", options.d_model(),
            options.heads());
  namespace names = checkpoint::attention_projection;
  const int64_t d = options.d_model();
  // As before the fusion: every layer built (each draws its default initialization), then
  // each initialized, in the order q, k, v, out, so the same random draws land in the same
  // rows and a fresh run starts from the same parameters.
  if (options.kind() == AttentionKind::kSelf) {
    qkv_proj_ = register_module(std::string(names::kQueryKeyValue), Linear(d, 3 * d));
  } else {
    q_proj_ = register_module(std::string(names::kQuery), Linear(d, d));
    kv_proj_ = register_module(std::string(names::kKeyValue), Linear(d, 2 * d));
  }
  out_proj_ = register_module(std::string(names::kOutput), Linear(d, d));
  if (qkv_proj_) {
    init_projection(qkv_proj_, 3);
  } else {
    init_projection(q_proj_);
    init_projection(kv_proj_, 2);
  }
  init_projection(out_proj_);
}

void MultiheadAttentionImpl::pack_weights(int64_t min_elements) {
  const auto pack = [min_elements](PackedWeight& packed, const Linear& linear) {
    if (linear) packed.pack(linear->weight, min_elements);
  };
  pack(packed_qkv_, qkv_proj_);
  pack(packed_q_, q_proj_);
  pack(packed_kv_, kv_proj_);
  pack(packed_out_, out_proj_);
}

at::Tensor MultiheadAttentionImpl::project(const Linear& linear, const PackedWeight& packed,
                                           const at::Tensor& x) const {
  if (quantization_ != Quantization::kNone)
    return quantized_linear(x, linear->weight, linear->bias, quantization_);
  return packed.linear(x, linear->weight, linear->bias);
}

at::Tensor MultiheadAttentionImpl::split_heads(const at::Tensor& x) const {
  const int64_t heads = options_.heads();
  return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).transpose(1, 2);
}

std::pair<at::Tensor, KeyValue> MultiheadAttentionImpl::project_self(const at::Tensor& x) {
  TORCH_CHECK(qkv_proj_, "attention: a self-attention call on a cross-attention block");
  const std::vector<at::Tensor> qkv = project(qkv_proj_, packed_qkv_, x).chunk(3, -1);
  return {split_heads(qkv[0]), {split_heads(qkv[1]), split_heads(qkv[2])}};
}

KeyValue MultiheadAttentionImpl::project_key_value(const at::Tensor& memory) {
  TORCH_CHECK(kv_proj_, "attention: a cross-attention call on a self-attention block");
  const std::vector<at::Tensor> kv = project(kv_proj_, packed_kv_, memory).chunk(2, -1);
  return {split_heads(kv[0]), split_heads(kv[1])};
}

at::Tensor MultiheadAttentionImpl::forward(const at::Tensor& x, const at::Tensor& mask,
                                           bool causal) {
  auto [q, kv] = project_self(x);
  return attend_heads(q, kv, mask, causal);
}

at::Tensor MultiheadAttentionImpl::step(const at::Tensor& x, KeyValueCache& cache) {
  auto [q, kv] = project_self(x);
  cache.append(kv);
  // The newest position may see every cached one: no mask (is_causal would wrongly align
  // the single query with the first key).
  return attend_heads(q, cache.view(), /*mask=*/{}, /*causal=*/false);
}

at::Tensor MultiheadAttentionImpl::attend(const at::Tensor& query, const KeyValue& kv,
                                          const at::Tensor& mask) {
  TORCH_CHECK(q_proj_, "attention: a cross-attention call on a self-attention block");
  return attend_heads(split_heads(project(q_proj_, packed_q_, query)), kv, mask, /*causal=*/false);
}

at::Tensor MultiheadAttentionImpl::attend_heads(const at::Tensor& q, const KeyValue& kv,
                                                const at::Tensor& mask, bool causal) {
  // is_causal lets SDPA use the flash kernel; it cannot be combined with a mask.
  TORCH_CHECK(!(causal && mask.defined()), "attention: pass either a mask or causal, not both");
  const double dropout = is_training() ? options_.dropout() : 0.0;
  const std::optional<at::Tensor> attn_mask =
      mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt;
  // LibTorch's CPU flash-attention kernel is slow in half precision for the short sequences of
  // translation, its backward above all: up to about 200 keys the plain math path (matmul,
  // softmax, matmul) is faster, up to 2x at 32 to 64 keys (docs/performance-log.md). In float32,
  // on GPUs and for long sequences, SDPA picks its kernel as usual.
  const bool math_path = q.is_cpu() && at::isReducedFloatingType(q.scalar_type()) &&
                         kv.key.size(2) <= kMathAttentionMaxKeys;
  // The kernel has no backward: it serves evaluation where nothing asks for gradients.
  const bool no_gradient =
      !q.requires_grad() && !kv.key.requires_grad() && !kv.value.requires_grad();
  const bool few_queries = q.is_cpu() && !is_training() && no_gradient &&
                           q.scalar_type() == at::kFloat && !causal && q.size(2) <= kFewQueries;
  if (few_queries) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    return project(out_proj_, packed_out_, attend_few_queries(q, kv.key, kv.value, mask, scale));
  }
  at::Tensor context;
  if (math_path) {
    // The math op takes an additive mask: a boolean one would be misread (SDPA's front end
    // converts it the same way before choosing a kernel).
    std::optional<at::Tensor> additive;
    if (attn_mask) {
      additive = at::zeros(attn_mask->sizes(), q.options())
                     .masked_fill_(attn_mask->logical_not(), -std::numeric_limits<double>::infinity());
    }
    context = std::get<0>(
        at::_scaled_dot_product_attention_math(q, kv.key, kv.value, additive, dropout, causal));
  } else {
    context = at::scaled_dot_product_attention(q, kv.key, kv.value, attn_mask, dropout, causal);
  }
  // [B, heads, T, d_head] -> [B, T, d].
  return project(out_proj_, packed_out_,
                 context.transpose(1, 2).reshape({q.size(0), q.size(2), -1}));
}

}  // namespace nmt::model
