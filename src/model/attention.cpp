#include "model/attention.h"

#include <limits>
#include <optional>

#include <torch/nn/init.h>

#include "util/error.h"

namespace nmt::model {
namespace {

/// Longest key sequence for which half-precision CPU attention takes the math path.
constexpr int64_t kMathAttentionMaxKeys = 192;

}  // namespace

void init_projection(torch::nn::Linear& linear) {
  torch::nn::init::xavier_uniform_(linear->weight);
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
  const int64_t d = options.d_model();
  q_proj_ = register_module("q_proj", torch::nn::Linear(d, d));
  k_proj_ = register_module("k_proj", torch::nn::Linear(d, d));
  v_proj_ = register_module("v_proj", torch::nn::Linear(d, d));
  out_proj_ = register_module("out_proj", torch::nn::Linear(d, d));
  for (torch::nn::Linear* linear : {&q_proj_, &k_proj_, &v_proj_, &out_proj_}) {
    init_projection(*linear);
  }
}

at::Tensor MultiheadAttentionImpl::split_heads(const at::Tensor& x) const {
  const int64_t heads = options_.heads();
  return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).transpose(1, 2);
}

KeyValue MultiheadAttentionImpl::project_key_value(const at::Tensor& memory) {
  return {split_heads(k_proj_(memory)), split_heads(v_proj_(memory))};
}

at::Tensor MultiheadAttentionImpl::attend(const at::Tensor& query, const KeyValue& kv,
                                          const at::Tensor& mask, bool causal) {
  // is_causal lets SDPA use the flash kernel; it cannot be combined with a mask.
  TORCH_CHECK(!(causal && mask.defined()), "attention: pass either a mask or causal, not both");
  const at::Tensor q = split_heads(q_proj_(query));
  const double dropout = is_training() ? options_.dropout() : 0.0;
  const std::optional<at::Tensor> attn_mask =
      mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt;
  // LibTorch's CPU flash-attention kernel is slow in half precision for the short sequences of
  // translation, its backward above all: up to about 200 keys the plain math path (matmul,
  // softmax, matmul) is faster, up to 2x at 32 to 64 keys (docs/performance.md). In float32,
  // on GPUs and for long sequences, SDPA picks its kernel as usual.
  const bool math_path = q.is_cpu() && at::isReducedFloatingType(q.scalar_type()) &&
                         kv.key.size(2) <= kMathAttentionMaxKeys;
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
  return out_proj_(context.transpose(1, 2).reshape({query.size(0), query.size(1), -1}));
}

at::Tensor MultiheadAttentionImpl::forward(const at::Tensor& query, const at::Tensor& memory,
                                           const at::Tensor& mask, bool causal) {
  return attend(query, project_key_value(memory), mask, causal);
}

}  // namespace nmt::model
