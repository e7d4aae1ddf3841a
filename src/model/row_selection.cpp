#include "model/row_selection.h"

#include <vector>

#include <ATen/ATen.h>

namespace nmt::model {

std::optional<RowMoves> few_row_moves(const at::Tensor& order, int64_t rows) {
  if (!order.is_cpu() || order.dim() != 1 || order.scalar_type() != at::kLong) return std::nullopt;
  const int64_t count = order.size(0);
  if (count > rows) return std::nullopt;
  const at::Tensor contiguous = order.contiguous();
  const int64_t* index = contiguous.const_data_ptr<int64_t>();
  std::vector<int64_t> to;
  std::vector<int64_t> from;
  for (int64_t i = 0; i < count; ++i) {
    if (index[i] == i) continue;
    if (2 * static_cast<int64_t>(to.size() + 1) >= count) return std::nullopt;
    to.push_back(i);
    from.push_back(index[i]);
  }
  const auto options = at::TensorOptions().dtype(at::kLong);
  const auto size = static_cast<int64_t>(to.size());
  return RowMoves{at::tensor(to, options).view({size}), at::tensor(from, options).view({size})};
}

void apply_row_moves(const at::Tensor& t, const RowMoves& moves) {
  if (moves.to.numel() == 0) return;
  const at::Tensor& to = t.is_cpu() ? moves.to : moves.to.to(t.device());
  const at::Tensor& from = t.is_cpu() ? moves.from : moves.from.to(t.device());
  t.index_copy_(0, to, t.index_select(0, from));
}

void select_rows(at::Tensor& t, const at::Tensor& order) {
  if (!t.defined()) return;
  if (const std::optional<RowMoves> moves = few_row_moves(order, t.size(0))) {
    apply_row_moves(t, *moves);
    t = t.narrow(0, 0, order.size(0));
    return;
  }
  t = t.index_select(0, order);
}

}  // namespace nmt::model
