#pragma once
// Walking the epoch plans step by step, with a position that can be saved and restored
// exactly: restoring recomputes the epoch's plan from the seed and jumps to the step, so the
// batch that would have come next comes next, without replaying the epoch.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batch_plan.h"

namespace nmt::data {

/// Position of the next step: (epoch, step within the epoch's plan). The plan is the epoch's
/// full plan, or, after a resume with another global batch, the plan of what the updates in
/// `consumed` left over (BatchPlanner::plan_epoch).
struct IteratorState {
  int64_t epoch = 1;  ///< 1-based epoch
  int64_t step = 0;   ///< 0-based index of the next step in that epoch's plan
  std::vector<ConsumedUpdates> consumed;  ///< this epoch's updates under earlier global batches
  bool operator==(const IteratorState& o) const {
    return epoch == o.epoch && step == o.step && consumed == o.consumed;
  }
};

/// Where a saved position continues when the job now runs `world_size` ranks with
/// `accumulation` steps per update, having been saved by `saved_world_size` x
/// `saved_accumulation` (at an update boundary). With the same product the plan's updates are
/// the same, so only the step index is rescaled; otherwise the updates done in this epoch
/// join `consumed` and the rest of the epoch is planned anew. Throws DataError when the saved
/// step is not at an update boundary.
IteratorState continue_position(const IteratorState& saved, int64_t saved_world_size,
                                int64_t saved_accumulation, int64_t world_size,
                                int64_t accumulation);

/// "8:120,4:10" for the consumed updates (group:updates, oldest first), and back; "" is none.
/// parse throws DataError naming the text when it is malformed.
std::string format_consumed(const std::vector<ConsumedUpdates>& consumed);
std::vector<ConsumedUpdates> parse_consumed(const std::string& text);

/// Steps of successive epochs, starting from a saved position.
class BatchIterator {
 public:
  BatchIterator(std::shared_ptr<const BatchPlanner> planner, IteratorState start = {});
  /// The next step (batches of all ranks; rank r uses batches[r]), then advances; after an
  /// epoch's last step the position is (next epoch, step 0). The reference is valid until the
  /// next call.
  const Step& next();
  /// Where the next call to next() continues.
  IteratorState state() const { return state_; }
  /// The epoch of the step next() returned last.
  int64_t last_epoch() const { return step_epoch_; }
  /// Steps in the epoch plan at hand (the one of the last step, until next() moves on).
  int64_t steps_in_epoch() const { return plan_->num_steps(); }

 private:
  std::shared_ptr<const BatchPlanner> planner_;
  void start_next_epoch();

  IteratorState state_;
  int64_t step_epoch_ = 0;
  std::shared_ptr<const EpochPlan> plan_;  ///< the planner's (BatchPlanner::shared_plan)
  Step current_;
};

}  // namespace nmt::data
