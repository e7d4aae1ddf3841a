#pragma once
// Learning rate per optimizer update: linear warm-up, then the configured schedule.

#include <cstdint>

#include "train/train_options.h"

namespace nmt::train {

/// Learning rate of update `update` (1-based; throws nmt::Error for < 1). With W =
/// warmup_steps > 0, updates 1..W rise linearly, lr * update / W (lr / W first, lr at W).
/// After warm-up (or from the start when W = 0):
///   inverse_sqrt: lr * sqrt(max(W, 1) / update)  (lr at the end of warm-up)
///   constant:     lr
///   cosine:       lr * (1 + cos(pi * (update - W) / (max_steps - W))) / 2, from lr to 0 at
///                 max_steps and 0 beyond; constant lr when max_steps = 0 or max_steps <= W.
double learning_rate(const TrainOptions& options, int64_t update);

}  // namespace nmt::train
