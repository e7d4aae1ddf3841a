#include "model/key_value_cache.h"

#include <optional>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "model/row_selection.h"

namespace nmt::model {
namespace {

/// Positions of the first buffers. Small, because the buffers are per row and layer: with
/// doubling, a buffer holds under twice its filled positions once it has grown (up to 4x
/// counting the spare pair), where 64 held 3x the positions of a 20-token sentence (12x with
/// the spare), gigabytes for a 24-layer decoder's beams on a GPU. Growing copies the filled
/// positions once per doubling.
constexpr int64_t kFirstCapacity = 16;

/// An uninitialized buffer of rows x capacity positions shaped and typed like like
/// [*, heads, *, d_head].
at::Tensor buffer_like(const at::Tensor& like, int64_t rows, int64_t capacity) {
  return at::empty({rows, like.size(1), capacity, like.size(3)}, like.options());
}

/// The filled part of a buffer: its first rows and first length positions.
at::Tensor filled(const at::Tensor& buffer, int64_t rows, int64_t length) {
  return buffer.narrow(0, 0, rows).narrow(2, 0, length);
}

}  // namespace

KeyValue KeyValueCache::view() const {
  if (length_ == 0) return {};
  return {filled(key_, rows_, length_), filled(value_, rows_, length_)};
}

void KeyValueCache::append(const KeyValue& next) {
  const at::Tensor& key = next.key;
  TORCH_CHECK(key.dim() == 4 && key.size(2) == 1 && next.value.sizes() == key.sizes(),
              "key/value cache: expected one position [rows, heads, 1, d_head], found keys ",
              key.sizes(), " and values ", next.value.sizes());
  at::NoGradGuard no_grad;
  if (length_ == 0) {
    rows_ = key.size(0);
    const bool fits = key_.defined() && key_.size(0) >= rows_ && key_.size(1) == key.size(1) &&
                      key_.size(3) == key.size(3) && key_.dtype() == key.dtype() &&
                      key_.device() == key.device();
    if (!fits) {
      key_ = buffer_like(key, rows_, kFirstCapacity);
      value_ = buffer_like(key, rows_, kFirstCapacity);
      spare_key_ = spare_value_ = at::Tensor();
    }
  } else {
    TORCH_CHECK(key.size(0) == rows_ && key.size(1) == key_.size(1) && key.size(3) == key_.size(3),
                "key/value cache: a position of ", key.sizes(), " appended to ", rows_, " rows of ",
                key_.size(1), " heads of ", key_.size(3));
    if (length_ == key_.size(2)) grow(2 * length_);
  }
  key_.narrow(0, 0, rows_).narrow(2, length_, 1).copy_(key);
  value_.narrow(0, 0, rows_).narrow(2, length_, 1).copy_(next.value);
  ++length_;
}

void KeyValueCache::grow(int64_t capacity) {
  at::Tensor key = buffer_like(key_, rows_, capacity);
  at::Tensor value = buffer_like(value_, rows_, capacity);
  filled(key, rows_, length_).copy_(filled(key_, rows_, length_));
  filled(value, rows_, length_).copy_(filled(value_, rows_, length_));
  key_ = std::move(key);
  value_ = std::move(value);
  spare_key_ = spare_value_ = at::Tensor();  // of the old capacity
}

void KeyValueCache::reorder(const at::Tensor& order) {
  TORCH_CHECK(order.dim() == 1, "key/value cache: expected row indices [R], found ", order.sizes());
  if (length_ == 0) return;
  at::NoGradGuard no_grad;
  const int64_t rows = order.size(0);
  if (const std::optional<RowMoves> moves = few_row_moves(order, rows_)) {
    // Most rows stay: only the moved ones are copied, within the buffers.
    apply_row_moves(filled(key_, rows_, length_), *moves);
    apply_row_moves(filled(value_, rows_, length_), *moves);
    rows_ = rows;
    return;
  }
  if (!spare_key_.defined() || spare_key_.size(0) < rows) {
    spare_key_ = buffer_like(key_, rows, key_.size(2));
    spare_value_ = buffer_like(value_, rows, value_.size(2));
  }
  // Gathered straight into the spare buffers' filled part (a strided view): one copy.
  at::Tensor key = filled(spare_key_, rows, length_);
  at::Tensor value = filled(spare_value_, rows, length_);
  gather_rows(key, filled(key_, rows_, length_), order);
  gather_rows(value, filled(value_, rows_, length_), order);
  std::swap(key_, spare_key_);
  std::swap(value_, spare_value_);
  rows_ = rows;
}

}  // namespace nmt::model
