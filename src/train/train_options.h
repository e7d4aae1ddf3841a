#pragma once
// Optimization and the training loop (YAML section `train`).

#include <cstdint>
#include <string>

#include "model/model_options.h"

namespace nmt::train {

/// The optimizer. kSgd is plain SGD (no momentum): Adam's update is nearly invariant to the
/// scale of the gradient, so checks of the gradients' scale (tests, the reference loop) use it.
enum class Optimizer { kAdam, kAdamW, kSgd };
enum class LrSchedule { kInverseSqrt, kConstant, kCosine };
/// What picks the best checkpoint and drives early stopping.
enum class BestMetric { kLoss, kBleu, kChrf };
/// train.best_set for the mean over all validation sets.
inline constexpr const char* kMeanOfSets = "mean";

struct TrainOptions {
  int64_t max_steps = 100000;           ///< optimizer updates to run; 0: no limit
  int64_t max_epochs = 0;               ///< passes over the training data; 0: no limit
  int64_t max_minutes = 0;              ///< wall-clock budget (minutes); 0: no limit
  int64_t seed = 1;                     ///< seed for initialization, dropout and data order
  Optimizer optimizer = Optimizer::kAdam;  ///< Adam or AdamW (decoupled weight decay)
  double lr = 7e-4;                     ///< peak learning rate
  double adam_beta1 = 0.9;              ///< Adam beta1
  double adam_beta2 = 0.98;             ///< Adam beta2
  double adam_eps = 1e-9;               ///< Adam epsilon
  double weight_decay = 0.0;            ///< weight decay
  LrSchedule schedule = LrSchedule::kInverseSqrt;  ///< learning-rate schedule after warm-up
  int64_t warmup_steps = 4000;          ///< linear warm-up length (steps)
  double clip_norm = 0.0;               ///< gradient-norm clipping threshold; 0: off
  double label_smoothing = 0.1;         ///< label-smoothing epsilon
  /// Moving average of the parameters (train/ema.h): ema = decay ema + (1 - decay) p after
  /// every update; 0: off. Validation and nmt-translate use it when on.
  double ema_decay = 0.0;
  /// Fine-tuning: a checkpoint file or run directory whose model parameters and vocabulary a
  /// fresh run starts from (optimizer, schedule and data position start anew); ignored once
  /// the run has a checkpoint of its own. Empty: random initialization.
  std::string init_from;
  int64_t log_every = 100;              ///< steps between log lines and metrics.jsonl records
  /// Also write metrics.jsonl's records as TensorBoard events in <run_dir>/tensorboard/
  /// (config key log.tensorboard: it is about output, like log.*, and not stored for a resume).
  bool tensorboard = false;
  int64_t valid_every = 1000;           ///< steps between validations; 0: never
  bool valid_translate = false;         ///< validation also translates and scores BLEU and chrF
  int64_t valid_beam = 1;               ///< beam of validation translation (1: greedy)
  BestMetric best_metric = BestMetric::kLoss;  ///< ranks checkpoints (bleu/chrf need valid_translate)
  /// Whose best_metric ranks checkpoints: a data.valid set's name, kMeanOfSets (the mean over
  /// all sets), or empty: the first set.
  std::string best_set;
  int64_t patience = 0;                 ///< stop after this many validations without improvement; 0: never
  int64_t threads = 0;                  ///< intra-op CPU threads per worker; 0: cores / workers
  bool cache_host_memory = true;        ///< reuse freed CPU tensor memory (dist/host_allocator.h)
  /// Updates skipped in a row because a rank ran out of memory that stop the run (oom_skip.h).
  int64_t max_oom_skips = 3;
  /// Recompute each encoder and decoder layer's forward in backward instead of keeping its
  /// activations (model/recompute.h): about one more forward per update, same gradients.
  bool activation_checkpointing = false;
  /// Quantization-aware training (model/fake_quantization.h): kInt8 trains and validates with
  /// the weights and product inputs CTranslate2's int8 computes with; checkpoints stay float.
  model::Quantization quantize = model::Quantization::kNone;
};

}  // namespace nmt::train
