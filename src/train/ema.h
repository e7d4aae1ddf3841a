#pragma once
// An exponential moving average of the parameters (train.ema_decay): Marian's exponential
// smoothing, fairseq's --ema, OpenNMT-py's average_decay. A float32 copy of every parameter
// follows the trained ones after each optimizer update,
//   ema = d * ema + (1 - d) * p,  d = min(decay, (1 + step) / (10 + step))   (one foreach lerp)
// so it averages roughly the last 1 / (1 - decay) updates, which usually translates better
// than the last update's weights. Checkpoints keep it as the ema group (checkpoint/tensor_layout.h:
// "ema.<parameter>"); validation and nmt-translate use it when present.
//
//   ParameterAverage ema(named_parameters, 0.999);
//   optimizer.step(...);  ema.update(step);
//   { ParameterAverage::Swap swap(ema);  validate(model); }   // EMA weights inside the scope

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "train/optimizer.h"

namespace nmt::train {

/// A float32 exponential moving average of named parameters, on their device.
class ParameterAverage {
 public:
  /// Starts the average at the parameters' current values. decay must be in (0, 1).
  ParameterAverage(NamedTensors parameters, double decay);

  /// After update `step` (1-based): ema = d * ema + (1 - d) * p for every parameter, with
  /// d = min(decay, (1 + step) / (10 + step)). The warm-up keeps the random initialization
  /// from dominating early on (with d = 0.999 from the start it would still weigh 37% after
  /// 1,000 updates; measured: BLEU 3.3 against 11.7 for the trained weights). Queues device
  /// work only.
  void update(int64_t step);
  /// The decay used after update `step`.
  double decay_at(int64_t step) const;
  double decay() const { return decay_; }
  /// The averages, in parameter order, named like the parameters.
  const NamedTensors& averages() const { return averages_; }

  /// Starts the average anew at the parameters' current values (after loading others).
  void restart();
  /// Checkpoint tensors of the ema group: the average of every parameter, named like it
  /// (detached device tensors).
  NamedTensors state() const;
  /// Restores what state() saved; `find` looks up a name within the ema group. Returns
  /// false, changing nothing, when the checkpoint has no average (it was trained without
  /// EMA): the average then starts at the current parameters. Throws CheckpointError naming
  /// a missing tensor or one of another shape when some are present.
  bool load_state(const checkpoint::TensorFinder& find);

  /// Puts the averages into the parameters for the lifetime of the object and the trained
  /// values back after it, bit for bit (validation of the averaged weights).
  class Swap {
   public:
    explicit Swap(ParameterAverage& average);
    ~Swap();
    Swap(const Swap&) = delete;
    Swap& operator=(const Swap&) = delete;

   private:
    ParameterAverage& average_;
    std::vector<at::Tensor> saved_;
  };

 private:
  NamedTensors parameters_;
  NamedTensors averages_;
  double decay_;
};

}  // namespace nmt::train
