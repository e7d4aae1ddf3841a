#include "data/batch_iterator.h"

#include <cinttypes>
#include <cstdio>

#include <fmt/format.h>

#include "util/error.h"

namespace nmt::data {

BatchIterator::BatchIterator(std::shared_ptr<const BatchPlanner> planner, IteratorState start)
    : planner_(std::move(planner)), state_(start) {
  NMT_CHECK(start.epoch >= 1 && start.step >= 0, DataError,
            "iterator position (epoch {}, step {}) is not valid", start.epoch, start.step);
  plan_ = planner_->shared_plan(state_.epoch, state_.consumed);
  NMT_CHECK(state_.step <= steps_in_epoch(), DataError,
            "iterator position: step {} is past the {} steps of epoch {} (was the data or the "
            "number of ranks changed since the checkpoint?)",
            state_.step, steps_in_epoch(), state_.epoch);
}

const Step& BatchIterator::next() {
  // A loop: an epoch's rest may be empty (a resume with another global batch that came at
  // its end), and a position saved by an older version may sit at the end of its epoch.
  for (;;) {
    if (plan_->epoch != state_.epoch) {
      plan_.reset();  // the planner keeps it until the next epoch's is asked for
      plan_ = planner_->shared_plan(state_.epoch, state_.consumed);
    }
    if (state_.step < steps_in_epoch()) break;
    start_next_epoch();
  }
  current_ = plan_->step(state_.step);  // the rank batches copied out of the shared plan
  step_epoch_ = state_.epoch;
  ++state_.step;
  // After an epoch's last step the position is the next epoch's start, so that a loop that
  // stops after train.max_epochs epochs sees the epoch done without taking another step.
  if (state_.step >= steps_in_epoch()) start_next_epoch();
  return current_;
}

void BatchIterator::start_next_epoch() {
  ++state_.epoch;
  state_.step = 0;
  state_.consumed.clear();
}

IteratorState continue_position(const IteratorState& saved, int64_t saved_world_size,
                                int64_t saved_accumulation, int64_t world_size,
                                int64_t accumulation) {
  NMT_CHECK(saved_world_size >= 1 && saved_accumulation >= 1 && world_size >= 1 && accumulation >= 1,
            DataError, "ranks and accumulation must be >= 1 (saved {} x {}, now {} x {})",
            saved_world_size, saved_accumulation, world_size, accumulation);
  NMT_CHECK(saved.step % saved_accumulation == 0, DataError,
            "data position: step {} of epoch {} is not at the end of an update of {} steps",
            saved.step, saved.epoch, saved_accumulation);
  const int64_t updates = saved.step / saved_accumulation;
  IteratorState next = saved;
  if (saved_world_size * saved_accumulation == world_size * accumulation) {
    next.step = updates * accumulation;
  } else if (updates > 0) {
    next.consumed.push_back({saved_world_size * saved_accumulation, updates});
    next.step = 0;
  }
  return next;
}

std::string format_consumed(const std::vector<ConsumedUpdates>& consumed) {
  std::string text;
  for (const ConsumedUpdates& c : consumed) {
    if (!text.empty()) text += ',';
    text += fmt::format("{}:{}", c.group, c.updates);
  }
  return text;
}

std::vector<ConsumedUpdates> parse_consumed(const std::string& text) {
  std::vector<ConsumedUpdates> out;
  if (text.empty()) return out;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    const size_t end = comma == std::string::npos ? text.size() : comma;
    const std::string item = text.substr(start, end - start);
    ConsumedUpdates c;
    char tail = 0;
    NMT_CHECK(std::sscanf(item.c_str(), "%" SCNd64 ":%" SCNd64 "%c", &c.group, &c.updates, &tail) == 2 &&
                  c.group >= 1 && c.updates >= 0,
              DataError, "consumed updates '{}': expected GROUP:UPDATES[,GROUP:UPDATES...]", text);
    out.push_back(c);
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

}  // namespace nmt::data
