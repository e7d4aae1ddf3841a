#include "data/batch_iterator.h"

#include "util/error.h"

namespace nmt::data {

BatchIterator::BatchIterator(std::shared_ptr<const BatchPlanner> planner, IteratorState start)
    : planner_(std::move(planner)), state_(start) {
  NMT_CHECK(start.epoch >= 1 && start.step >= 0, DataError,
            "iterator position (epoch {}, step {}) is not valid", start.epoch, start.step);
  plan_ = planner_->plan_epoch(state_.epoch);
  NMT_CHECK(state_.step <= steps_in_epoch(), DataError,
            "iterator position: step {} is past the {} steps of epoch {} (was the data or the "
            "number of ranks changed since the checkpoint?)",
            state_.step, steps_in_epoch(), state_.epoch);
}

const Step& BatchIterator::next() {
  if (state_.step >= steps_in_epoch()) {
    ++state_.epoch;
    state_.step = 0;
    plan_ = planner_->plan_epoch(state_.epoch);
  }
  current_ = std::move(plan_.steps[static_cast<size_t>(state_.step)]);
  ++state_.step;
  return current_;
}

}  // namespace nmt::data
