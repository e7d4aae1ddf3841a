#include "model/packed_linear.h"

#include <optional>
#include <string_view>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/List.h>
#include <ATen/core/dispatch/Dispatcher.h>

namespace nmt::model {
namespace {

using LinearPointwise = at::Tensor(const at::Tensor&, const at::Tensor&,
                                   const std::optional<at::Tensor>&, std::string_view,
                                   c10::List<std::optional<at::Scalar>>,
                                   std::optional<std::string_view>);
using ReorderWeight = at::Tensor(const at::Tensor&, std::optional<int64_t>);

/// The registered ops, looked up once; nullopt where this LibTorch has none.
struct PackingOps {
  std::optional<c10::TypedOperatorHandle<LinearPointwise>> linear;
  std::optional<c10::TypedOperatorHandle<ReorderWeight>> reorder;
};

const PackingOps& packing_ops() {
  static const PackingOps ops = [] {
    PackingOps found;
    if (!at::hasMKLDNN()) return found;
    auto& dispatcher = c10::Dispatcher::singleton();
    const auto linear = dispatcher.findSchema({"mkldnn::_linear_pointwise", ""});
    const auto reorder = dispatcher.findSchema({"mkldnn::_reorder_linear_weight", ""});
    if (linear && reorder) {
      found.linear = linear->typed<LinearPointwise>();
      found.reorder = reorder->typed<ReorderWeight>();
    }
    return found;
  }();
  return ops;
}

bool is_cpu_float(const at::Tensor& t) { return t.is_cpu() && t.scalar_type() == at::kFloat; }

}  // namespace

int64_t min_packed_elements() {
  // The vendor, not the instruction set: MKL's sgemm runs other code on other vendors' processors.
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
  static const bool intel = __builtin_cpu_is("intel");
  return intel ? kMinPackedElements : kMinPackedElementsOffIntel;
#else
  return kMinPackedElements;
#endif
}

bool weight_packing_available() { return packing_ops().linear.has_value(); }

void PackedWeight::pack(const at::Tensor& weight, int64_t min_elements) {
  clear();
  if (!weight_packing_available() || !is_cpu_float(weight) || weight.dim() != 2 ||
      weight.numel() < min_elements)
    return;
  // No batch size: oneDNN picks the layout for products of any number of rows (a decoding
  // step's rows change as sentences finish).
  at::NoGradGuard no_grad;
  packed_ = packing_ops().reorder->call(weight.detach().contiguous(), std::nullopt);
  version_ = weight._version();
  source_ = weight.data_ptr();
}

bool PackedWeight::applies(const at::Tensor& x, const at::Tensor& weight) const {
  return packed_.defined() && is_cpu_float(x) && !at::GradMode::is_enabled() &&
         !at::autocast::is_autocast_enabled(at::kCPU) && weight.data_ptr() == source_ &&
         weight._version() == version_;
}

at::Tensor PackedWeight::linear(const at::Tensor& x, const at::Tensor& weight,
                                const at::Tensor& bias, bool relu) const {
  if (!applies(x, weight)) {
    at::Tensor y = at::linear(x, weight, bias);
    return relu ? at::relu(y) : y;
  }
  const std::optional<at::Tensor> b =
      bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt;
  return packing_ops().linear->call(x, packed_, b, relu ? "relu" : "none",
                                    c10::List<std::optional<at::Scalar>>(), std::nullopt);
}

}  // namespace nmt::model
