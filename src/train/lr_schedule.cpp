#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace nmt::train {

double learning_rate(const TrainOptions& options, int64_t update) {
  NMT_CHECK(update >= 1, nmt::Error, "learning_rate: expected an update >= 1, found {}", update);
  const double lr = options.lr;
  const int64_t warmup = std::max<int64_t>(options.warmup_steps, 0);
  if (update <= warmup) return lr * static_cast<double>(update) / static_cast<double>(warmup);
  switch (options.schedule) {
    case LrSchedule::kInverseSqrt:
      return lr * std::sqrt(static_cast<double>(std::max<int64_t>(warmup, 1)) /
                            static_cast<double>(update));
    case LrSchedule::kConstant:
      return lr;
    case LrSchedule::kCosine: {
      if (options.max_steps <= warmup) return lr;  // no known end (max_steps 0): constant
      const double progress = std::min(1.0, static_cast<double>(update - warmup) /
                                                static_cast<double>(options.max_steps - warmup));
      return lr * 0.5 * (1.0 + std::cos(M_PI * progress));
    }
  }
  return lr;
}

}  // namespace nmt::train
