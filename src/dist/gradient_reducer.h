#pragma once
// Sums gradients over all ranks in buckets, overlapping the all-reduces with backward (in
// the spirit of Flashlight's Reducer and PyTorch's DDP reducer). Usage, one update of
// `update_freq` micro-batches:
//
//   GradientReducer reducer(params, comm, options);
//   reducer.zero_grad();                       // .grad are zeroed views of the buckets
//   for (int k = 0; k < update_freq; ++k) {
//     reducer.set_sync(k + 1 == update_freq);  // inner micro-batches only accumulate
//     loss(k).backward();                      // last one: buckets launch as grads are ready
//   }
//   reducer.finalize();                        // .grad now holds the sum over all ranks
//
// Buckets of about bucket_mb MB are formed in reverse registration order (the order
// gradients become ready in backward) and launched strictly in bucket order, so every rank
// runs the same collectives in the same order. A parameter without a gradient in an update
// contributes zeros and ends with the reduced gradient of the others.
//
// The gradients live in the buckets (DDP's gradient_as_bucket_view): zero_grad() makes each
// .grad a zeroed view of its bucket's slice, backward accumulates into it in place, and the
// all-reduce sums the bucket where it is, so a rank holds one copy of the gradients, not two.
// A .grad that is not such a view (set to none, or replaced, by someone else) still works: it
// is copied into the bucket and the sum back, as a separate tensor costs.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "dist/process_group.h"

namespace nmt::dist {

/// How gradients are bucketed and when their all-reduces start.
struct GradientReducerOptions {
  double bucket_mb = 25.0;  ///< target bucket size (MB); a larger parameter gets its own
  bool overlap = true;      ///< true: launch buckets from autograd hooks during backward;
                            ///< false: launch all of them in finalize() (for comparison)
};

/// Sums the .grad of a fixed list of parameters over all ranks of a Communicator.
class GradientReducer {
 public:
  /// Registers hooks on the parameters that require grad (others are ignored). No other
  /// collective may run on `comm` between the first synced backward and finalize().
  GradientReducer(std::vector<at::Tensor> params, std::shared_ptr<Communicator> comm,
                  GradientReducerOptions options = {});
  /// Removes the hooks.
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  /// Zeroes the gradients in place as views of the buckets (allocating them at the first call).
  void zero_grad();
  /// Whether every parameter's .grad is a view of its bucket (as zero_grad leaves it).
  bool holds_gradients() const;
  /// false: backward passes only accumulate locally (inner micro-batches); true (default):
  /// the next backward launches the buckets as their gradients become ready.
  void set_sync(bool sync);
  /// Waits for every bucket (launching any not yet launched, in order) and writes the sums
  /// into .grad. Throws DistError naming the rank and the bucket on failure or timeout.
  void finalize();

  /// Number of buckets.
  size_t num_buckets() const;
  /// Indices into the constructor's `params` of each bucket's parameters.
  std::vector<std::vector<size_t>> bucket_params() const;
  /// What happened since the last clear_events(): "launch bucket 0", "backward end",
  /// "finalize", "finalize done", ...
  std::vector<std::string> events() const;
  /// Empties the event log.
  void clear_events();

 private:
  struct Bucket;
  void on_grad_ready(size_t param);  // called from the autograd hooks
  void on_backward_end();            // queued autograd callback
  void launch_ready_locked();        // launches consecutive complete buckets
  void launch_locked(size_t bucket);
  at::Tensor slice_locked(size_t param);  // params_[param]'s view of its bucket
  void reset_locked();
  void record_locked(std::string event);

  GradientReducerOptions options_;
  std::shared_ptr<Communicator> comm_;
  std::vector<at::Tensor> params_;   // only those that require grad
  std::vector<size_t> param_index_;  // params_[i] is the constructor's params[index]
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;     // bucket of params_[i]
  std::vector<size_t> offset_of_;     // element offset of params_[i] in its bucket
  std::vector<uintptr_t> hook_keys_;  // to remove the hooks
  std::vector<std::shared_ptr<void>> grad_accumulators_;  // keep the hooked nodes alive

  mutable std::mutex mutex_;
  bool sync_ = true;
  bool callback_queued_ = false;  // "backward end" callback for this backward
  std::vector<bool> ready_;       // per params_ entry, in this update
  size_t next_launch_ = 0;        // buckets [0, next_launch_) are in flight
  std::string error_;             // misuse seen in a hook, thrown by finalize
  std::vector<std::string> events_;
};

}  // namespace nmt::dist
