#include "model/row_selection.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <ATen/ATen.h>

namespace nmt::model {
namespace {

/// A CPU tensor's rows as runs of bytes that memcpy can copy: row r is `runs` runs of
/// `run_bytes` bytes, starting at base + r * row_stride + k * run_stride (k < runs).
struct RowRuns {
  char* base = nullptr;
  int64_t rows = 0, runs = 0, run_bytes = 0, row_stride = 0, run_stride = 0;
};

/// t's rows as runs, where its dimensions after the first are contiguous after at most one
/// (a cache's filled view [rows, heads, length, d_head]: a run per head); nullopt otherwise.
std::optional<RowRuns> row_runs(const at::Tensor& t) {
  if (!t.is_cpu() || t.dim() < 2 || t.numel() == 0 || t.is_conj() || t.is_neg())
    return std::nullopt;
  // Dimensions first_inner.. are contiguous: inner elements a row's run holds.
  int64_t first_inner = t.dim();
  int64_t inner = 1;
  while (first_inner > 1 && (t.size(first_inner - 1) == 1 || t.stride(first_inner - 1) == inner)) {
    inner *= t.size(first_inner - 1);
    --first_inner;
  }
  // Broadcast rows or runs (stride 0) are one memory location for many: left to ATen.
  if (first_inner > 2 || (t.size(0) > 1 && t.stride(0) == 0) ||
      (first_inner == 2 && t.size(1) > 1 && t.stride(1) == 0))
    return std::nullopt;
  const int64_t element = t.element_size();
  RowRuns r;
  r.base = static_cast<char*>(t.data_ptr());
  r.rows = t.size(0);
  r.runs = first_inner == 1 ? 1 : t.size(1);
  r.run_stride = first_inner == 1 ? 0 : t.stride(1) * element;
  r.run_bytes = inner * element;
  r.row_stride = t.stride(0) * element;
  return r;
}

bool same_row_shape(const RowRuns& a, const RowRuns& b) {
  return a.runs == b.runs && a.run_bytes == b.run_bytes;
}

void copy_row(const RowRuns& dst, int64_t to, const RowRuns& src, int64_t from) {
  char* out = dst.base + to * dst.row_stride;
  const char* in = src.base + from * src.row_stride;
  for (int64_t k = 0; k < dst.runs; ++k)
    std::memcpy(out + k * dst.run_stride, in + k * src.run_stride,
                static_cast<size_t>(dst.run_bytes));
}

/// Whether no row in `from` is also in `to` (to ascending, as few_row_moves makes it).
bool sources_stay(const at::Tensor& to, const at::Tensor& from) {
  const int64_t* t = to.const_data_ptr<int64_t>();
  const int64_t* f = from.const_data_ptr<int64_t>();
  const int64_t n = to.numel();
  if (!std::is_sorted(t, t + n)) return false;
  for (int64_t i = 0; i < n; ++i)
    if (std::binary_search(t, t + n, f[i])) return false;
  return true;
}

}  // namespace

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
  if (const std::optional<RowRuns> runs = row_runs(t);
      runs && moves.to.is_cpu() && moves.from.is_cpu() && moves.to.is_contiguous() &&
      moves.from.is_contiguous() && sources_stay(moves.to, moves.from)) {
    const int64_t* to = moves.to.const_data_ptr<int64_t>();
    const int64_t* from = moves.from.const_data_ptr<int64_t>();
    for (int64_t i = 0; i < moves.to.numel(); ++i) {
      TORCH_CHECK(to[i] >= 0 && to[i] < runs->rows && from[i] >= 0 && from[i] < runs->rows,
                  "apply_row_moves: a move from row ", from[i], " to row ", to[i], " of ",
                  runs->rows);
      copy_row(*runs, to[i], *runs, from[i]);
    }
    return;
  }
  const at::Tensor& to = t.is_cpu() ? moves.to : moves.to.to(t.device());
  const at::Tensor& from = t.is_cpu() ? moves.from : moves.from.to(t.device());
  t.index_copy_(0, to, t.index_select(0, from));
}

void gather_rows(const at::Tensor& dst, const at::Tensor& src, const at::Tensor& order) {
  TORCH_CHECK(order.dim() == 1 && dst.dim() == src.dim() && dst.size(0) == order.size(0),
              "gather_rows: ", order.sizes(), " rows of ", src.sizes(), " into ", dst.sizes());
  const std::optional<RowRuns> out = row_runs(dst);
  const std::optional<RowRuns> in = row_runs(src);
  if (!out || !in || !same_row_shape(*out, *in) || dst.scalar_type() != src.scalar_type() ||
      !order.is_cpu() || order.scalar_type() != at::kLong ||
      dst.sizes().slice(1) != src.sizes().slice(1)) {
    at::Tensor out_view = dst;  // index_select_out takes a non-const handle to write through
    at::index_select_out(out_view, src, 0, order);
    return;
  }
  const at::Tensor contiguous = order.contiguous();
  const int64_t* index = contiguous.const_data_ptr<int64_t>();
  for (int64_t r = 0; r < out->rows; ++r) {
    TORCH_CHECK(index[r] >= 0 && index[r] < in->rows, "gather_rows: index ", index[r],
                " out of range for ", in->rows, " rows");
    copy_row(*out, r, *in, index[r]);
  }
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
