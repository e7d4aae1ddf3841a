#pragma once
// Summing a few figures over the ranks in one small all-reduce: the loss and token counts of
// a log interval, a run's tokens and per-rank peaks, validation statistics, a benchmark's
// totals. The caller names the fields of its own struct; they are packed, summed as float64
// (integers are exact up to 2^53) and written back, so nobody reads a tensor by index.
//
//   struct Totals { double loss = 0; int64_t tokens = 0; } t = ...;
//   sum_over_ranks(comm, {t.loss, t.tokens});   // null comm (one process): unchanged

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace nmt::dist {

class Communicator;

/// One number of the caller's that is summed over the ranks: a double or an int64_t.
class SummedField {
 public:
  SummedField(double& value) : double_(&value) {}    // NOLINT: implicit by design
  SummedField(int64_t& value) : int64_(&value) {}    // NOLINT: implicit by design
  /// Its value as a float64.
  double get() const { return double_ ? *double_ : static_cast<double>(*int64_); }
  /// Stores the sum (an int64_t field takes it rounded toward zero).
  void set(double sum) const {
    if (double_) *double_ = sum;
    else *int64_ = static_cast<int64_t>(sum);
  }

 private:
  double* double_ = nullptr;
  int64_t* int64_ = nullptr;
};

/// Sums every field over the ranks, in place, in one all-reduce of float64 values; every rank
/// must call it with the same number of fields. A null communicator (one process) leaves the
/// fields as they are.
void sum_over_ranks(Communicator* comm, const std::vector<SummedField>& fields);
/// The same for a list written in place: sum_over_ranks(comm, {a.x, a.y}).
inline void sum_over_ranks(Communicator* comm, std::initializer_list<SummedField> fields) {
  sum_over_ranks(comm, std::vector<SummedField>(fields));
}

/// Slots of a figure that each rank has one of (its peak memory): `mine` at index `rank`, 0
/// elsewhere. Summed with the other fields, they gather it in the same all-reduce.
std::vector<double> own_slot(int64_t rank, int64_t world_size, double mine);

/// Appends one field per element of `values` to `fields`.
void append_fields(std::vector<SummedField>& fields, std::vector<double>& values);

}  // namespace nmt::dist
