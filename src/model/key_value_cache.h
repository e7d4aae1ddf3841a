#pragma once
// The self-attention keys and values that incremental decoding carries from one step to the
// next. They live in buffers with room for more positions: a step writes its position in place
// instead of concatenating (at::cat copied the whole cache every step, so a sentence of T
// tokens copied O(T^2)), and a reorder (beam search, rows leaving the batch) gathers the rows it
// keeps into a second buffer, which then becomes the first: one copy of the filled positions
// per reorder, and no allocation once the buffers are big enough.
//
// Memory: two buffers of (rows x capacity) positions, the capacity doubling when it runs out,
// so up to 4x the filled positions of one buffer, as the price of no allocation per step.
//
// Decoding only: what is written into the cache carries no gradient.

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace nmt::model {

/// Keys and values split into heads, each [B, heads, S, d_model / heads].
struct KeyValue {
  at::Tensor key;    ///< projected keys
  at::Tensor value;  ///< projected values
};

/// Keys and values of the positions decoded so far, rows x positions, grown one position a
/// step.
class KeyValueCache {
 public:
  /// Positions held.
  int64_t length() const { return length_; }
  /// Rows held (0 while empty).
  int64_t rows() const { return length_ == 0 ? 0 : rows_; }

  /// The cached keys and values [rows, heads, length, d_head]: views into the buffers, valid
  /// until the next append or reorder. Undefined tensors while the cache is empty.
  KeyValue view() const;

  /// Appends one position: next.key and next.value [rows, heads, 1, d_head]. The first append
  /// takes the rows, heads, dtype and device from next; later ones must match them.
  void append(const KeyValue& next);

  /// Keeps rows order [R'] (int64, on the cache's device), in that order; an index may repeat
  /// (beams that extend the same row). While empty there is nothing to keep: the next append
  /// sets the rows.
  void reorder(const at::Tensor& order);

 private:
  /// Moves the filled positions to buffers of `capacity` positions.
  void grow(int64_t capacity);

  at::Tensor key_, value_;              // [rows >= rows_, heads, capacity, d_head]
  at::Tensor spare_key_, spare_value_;  // the other pair, which reorder gathers into
  int64_t rows_ = 0;
  int64_t length_ = 0;
};

}  // namespace nmt::model
