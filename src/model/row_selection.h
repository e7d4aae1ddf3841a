#pragma once
// Keeping some rows of a decoding state in a new order, as index_select(0, order) does, but in
// place when the order leaves most rows where they are. Greedy search drops the rows whose
// sentence ended: gathered, every later row moves down and the whole state (each layer's
// cached keys and values, the encoder's keys and values, the source mask) is copied on every
// step where any sentence ends, which is most steps of a big batch. If instead the rows that
// remain past the new end fill the places of those that ended, only those rows move
// (decode/search.cpp orders the rows so).
//
// In place means the tensors' storage is rewritten: callers use it on tensors that only the
// decoding state holds.

#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>

namespace nmt::model {

/// The rows that an order moves: order[to[i]] == from[i] != to[i] (int64, on the CPU).
struct RowMoves {
  at::Tensor to;
  at::Tensor from;
};

/// The moves by which the first order.size(0) rows of a tensor of `rows` rows become its
/// index_select(0, order), when that is cheaper than a gather: order on the CPU, no longer
/// than rows, and under half of its rows moving (a moved row is copied twice). nullopt otherwise.
std::optional<RowMoves> few_row_moves(const at::Tensor& order, int64_t rows);

/// Rewrites t's rows by moves: t[to[i]] = t[from[i]] as it was before (sources are read first,
/// so a row may be both). On the CPU, where no source is also a destination (as the searches'
/// orders make them: rows that move come from rows that stay or leave), each moved row is one
/// memcpy per contiguous run instead of a copy out and a copy back.
void apply_row_moves(const at::Tensor& t, const RowMoves& moves);

/// dst = src.index_select(0, order), for dst of order.size(0) rows shaped like src's rows and not
/// overlapping it; on the CPU a row is copied as memcpy of its contiguous runs (a cache's filled
/// view is one run per head), where index_select into a strided view goes element-wise.
void gather_rows(const at::Tensor& dst, const at::Tensor& src, const at::Tensor& order);

/// t = t.index_select(0, order), in place and narrowed where few_row_moves finds few moves.
/// Undefined t stays undefined.
void select_rows(at::Tensor& t, const at::Tensor& order);

}  // namespace nmt::model
