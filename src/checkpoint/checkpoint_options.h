#pragma once
// When and what to save (YAML section `checkpoint`).

#include <cstdint>

namespace nmt::checkpoint {

struct CheckpointOptions {
  int64_t every_steps = 1000;           ///< steps between checkpoints (one is always written at the end)
  int64_t keep_last = 5;                ///< newest checkpoints kept; older ones are deleted
  int64_t keep_best = 1;                ///< best checkpoints kept, by train.best_metric
};

}  // namespace nmt::checkpoint
