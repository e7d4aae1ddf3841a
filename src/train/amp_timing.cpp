#include "train/amp_timing.h"

#include <algorithm>
#include <string>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "data/batch_tensors.h"
#include "data/prepare.h"
#include "train/run_setup.h"
#include "train/updater.h"
#include "util/log.h"
#include "util/timer.h"

namespace nmt::train {
namespace {

double mean(const std::vector<double>& values) {
  double total = 0;
  for (const double v : values) total += v;
  return values.empty() ? 0.0 : total / double(values.size());
}

/// A probe Updater of `setup` in `mode`, its gradients not summed over ranks.
std::unique_ptr<Updater> probe_updater(const RunSetup& setup, const data::Vocabularies& vocab,
                                       amp::AmpMode mode) {
  RunSetup probe = setup;
  probe.precision = mode;
  auto updater = std::make_unique<Updater>(updater_setup(probe, vocab));
  updater->set_gradient_sync(false);
  return updater;
}

}  // namespace

nlohmann::ordered_json AmpTiming::to_json() const {
  return {{"warmup", warmup},           {"padded_tokens", padded_tokens},
          {"fp32_steps_s", fp32_steps}, {"bf16_steps_s", bf16_steps},
          {"fp32_s", fp32_s},           {"bf16_s", bf16_s},
          {"seconds", seconds}};
}

AmpTiming time_amp_modes(const RunSetup& setup, const data::PreparedData& data,
                         const AmpTimingOptions& options) {
  const auto start = Clock::now();
  AmpTiming t;
  t.warmup = std::max(0, options.warmup);
  const int rounds = std::max(1, options.rounds);
  log::info("train", "amp.mode auto: timing fp32 and bf16 on the first {} batches of epoch 1",
            t.warmup + rounds);
  std::unique_ptr<Updater> fp32 = probe_updater(setup, data.vocab, amp::AmpMode::kOff);
  std::unique_ptr<Updater> bf16 = probe_updater(setup, data.vocab, amp::AmpMode::kBf16);
  const std::unique_ptr<data::BatchPrefetcher> batches = first_epoch_batches(setup, data);
  const auto step = [](Updater& updater, const data::BatchTensors& batch) {
    updater.zero_grad();
    const auto t0 = Clock::now();
    updater.forward_backward(batch);
    const double s = seconds_since(t0);
    updater.zero_grad();
    return s;
  };
  for (int64_t i = 0; i < t.warmup; ++i) {
    const data::BatchTensors batch = batches->next();
    step(*fp32, batch);
    step(*bf16, batch);
  }
  for (int round = 0; round < rounds; ++round) {
    if (round > 0 && seconds_since(start) > options.budget_s) break;
    const data::BatchTensors batch = batches->next();
    t.padded_tokens += batch.src.numel() + batch.tgt_in.numel();
    t.fp32_steps.push_back(step(*fp32, batch));
    t.bf16_steps.push_back(step(*bf16, batch));
  }
  t.fp32_s = mean(t.fp32_steps);
  t.bf16_s = mean(t.bf16_steps);
  t.seconds = seconds_since(start);
  return t;
}

}  // namespace nmt::train
