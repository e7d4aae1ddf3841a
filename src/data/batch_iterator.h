#pragma once
// Walking the epoch plans step by step, with a position that can be saved and restored
// exactly: restoring recomputes the epoch's plan from the seed and jumps to the step, so the
// batch that would have come next comes next, without replaying the epoch.

#include <cstdint>
#include <memory>

#include "data/batch_plan.h"

namespace nmt::data {

/// Position of the next step: (epoch, step within the epoch's plan).
struct IteratorState {
  int64_t epoch = 1;  ///< 1-based epoch
  int64_t step = 0;   ///< 0-based index of the next step in that epoch's plan
  bool operator==(const IteratorState& o) const { return epoch == o.epoch && step == o.step; }
};

/// Steps of successive epochs, starting from a saved position.
class BatchIterator {
 public:
  BatchIterator(std::shared_ptr<const BatchPlanner> planner, IteratorState start = {});
  /// The next step (batches of all ranks; rank r uses batches[r]), then advances. Moves on to
  /// the next epoch's plan at the end of one. The reference is valid until the next call.
  const Step& next();
  /// Where the next call to next() continues.
  IteratorState state() const { return state_; }
  /// Steps in the current epoch.
  int64_t steps_in_epoch() const { return static_cast<int64_t>(plan_.steps.size()); }

 private:
  std::shared_ptr<const BatchPlanner> planner_;
  IteratorState state_;
  EpochPlan plan_;
  Step current_;
};

}  // namespace nmt::data
