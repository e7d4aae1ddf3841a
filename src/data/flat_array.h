#pragma once
// A read-only array that either owns its items (a vector) or reads them from a memory
// mapping that it keeps alive: epoch plans are built in memory by the planner and read by
// the other ranks of a node from the planner's file (data/plan_file.h), through one type.

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace nmt::data {

/// Items of type T, owned or mapped. Copies of a mapped array share the mapping.
template <class T>
class FlatArray {
 public:
  FlatArray() = default;
  /// Owns `items` (implicit, so that a vector is assigned as it is).
  FlatArray(std::vector<T> items)
      : owned_(std::move(items)) {}  // NOLINT(google-explicit-constructor)
  /// Reads `size` items at `items`, which `mapping` keeps valid.
  FlatArray(const T* items, size_t size, std::shared_ptr<const void> mapping)
      : items_(items), size_(size), mapping_(std::move(mapping)) {}

  const T* data() const { return mapping_ ? items_ : owned_.data(); }
  size_t size() const { return mapping_ ? size_ : owned_.size(); }
  bool empty() const { return size() == 0; }
  const T& operator[](size_t i) const { return data()[i]; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size(); }
  /// True when the items are read from a mapping (not owned).
  bool mapped() const { return mapping_ != nullptr; }

 private:
  std::vector<T> owned_;
  const T* items_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<const void> mapping_;
};

}  // namespace nmt::data
