#include "train/benchmark_run.h"

#include <chrono>
#include <functional>
#include <memory>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/tensor_groups.h"
#include "data/prepare.h"
#include "dist/device.h"
#include "dist/process_group.h"
#include "model/flops.h"
#include "model/transformer.h"
#include "train/hardware_peak.h"
#include "train/run_setup.h"
#include "train/updater.h"
#include "util/error.h"
#include "util/log.h"
#include "util/timer.h"

namespace nmt::train {
namespace {

/// One batch of fixed shape: sentences of synthetic_length random ids (no padding), as many
/// as max_tokens allows.
data::BatchTensors synthetic_batch(const RunSetup& setup, const data::Vocabularies& vocab,
                                   const BenchmarkOptions& options) {
  const int64_t length = options.synthetic_length > 0 ? options.synthetic_length
                                                      : std::max<int64_t>(2, setup.data.max_len / 2);
  const int64_t sentences = std::max<int64_t>(1, *setup.data.max_tokens / length);
  data::BatchTensors b = data::random_batch(sentences, length, vocab.src.size(),
                                            vocab.tgt.size(), vocab.tgt.bos_id());
  b.global_tgt_tokens = b.tgt_tokens * setup.world_size;
  return b;
}

/// --dump-batches: rank 0's batches, its initial parameters and the effective config.
class BatchDump {
 public:
  BatchDump(Updater& updater, const RunSetup& setup, const BenchmarkOptions& options,
            HardwarePeak hardware)
      : setup_(setup),
        options_(options),
        hardware_(std::move(hardware)),
        vocab_size_(updater.setup().tgt_vocab_size) {
    for (const auto& item : updater.model()->named_parameters())
      checkpoint::add_tensor(dump_, checkpoint::TensorGroup::kModel, item.key(),
                             item.value().detach().clone().cpu());
    update_freq_ = updater.setup().update_freq;
    src_vocab_ = updater.setup().src_vocab_size;
    pad_id_ = updater.setup().pad_id;
  }

  /// Wraps `inner` so that every batch it yields is also recorded.
  BatchSource recording(BatchSource inner) {
    return [this, inner = std::move(inner)] {
      data::BatchTensors batch = inner();
      const size_t i = tokens_.size();
      dump_.tensors.emplace_back(fmt::format("batch.{}.src", i), batch.src);
      dump_.tensors.emplace_back(fmt::format("batch.{}.tgt_in", i), batch.tgt_in);
      dump_.tensors.emplace_back(fmt::format("batch.{}.tgt_out", i), batch.tgt_out);
      tokens_.push_back(std::to_string(batch.global_tgt_tokens));
      flops_.push_back(fmt::format("{}", model::real_training_flops(setup_.model, vocab_size_,
                                                                    batch.src_lengths,
                                                                    batch.tgt_lengths)));
      if (i == 0)
        weight_flops0_ = fmt::format(
            "{}", model::training_flops(setup_.model, vocab_size_, batch.src.size(0),
                                        batch.src.size(1), batch.tgt_out.size(1),
                                        model::AttentionCount::kWeights));
      kernel_flops_.push_back(fmt::format(
          "{}", model::training_flops(setup_.model, vocab_size_, batch.src.size(0),
                                      batch.src.size(1), batch.tgt_out.size(1),
                                      model::AttentionCount::kKernel)));
      return batch;
    };
  }

  /// Writes the file: the config YAML holds the model, optimizer and amp settings.
  void write() {
    dump_.metadata = {
        {"config", setup_.config_yaml},
        {"vocab.src_size", std::to_string(src_vocab_)},
        {"vocab.tgt_size", std::to_string(vocab_size_)},
        {"vocab.pad_id", std::to_string(pad_id_)},
        {"benchmark.warmup", std::to_string(options_.warmup)},
        {"benchmark.steps", std::to_string(options_.steps)},
        {"benchmark.phase_steps", std::to_string(options_.phase_steps)},
        {"benchmark.update_freq", std::to_string(update_freq_)},
        {"benchmark.synthetic", options_.synthetic ? "true" : "false"},
        {"benchmark.threads", std::to_string(at::get_num_threads())},
        {"batch_global_tgt_tokens", fmt::format("{}", fmt::join(tokens_, ","))},
        {"batch_training_flops", fmt::format("{}", fmt::join(flops_, ","))},
        {"batch_kernel_flops", fmt::format("{}", fmt::join(kernel_flops_, ","))},
        {"batch0_weight_flops", weight_flops0_},
        {"hardware_peak_tflops", fmt::format("{}", hardware_.tflops)},
        {"hardware_peak_source", hardware_.source},
        {"batches", std::to_string(tokens_.size())},
    };
    checkpoint::save_checkpoint(options_.dump_batches, dump_);
    log::info("benchmark", "wrote {} batches, the initial parameters and the config to {}",
              tokens_.size(), options_.dump_batches.string());
  }

 private:
  const RunSetup& setup_;
  const BenchmarkOptions& options_;
  HardwarePeak hardware_;  ///< this rank's hardware peak, for the reference's MFU
  int64_t vocab_size_ = 0, src_vocab_ = 0, pad_id_ = 0, update_freq_ = 1;
  checkpoint::CheckpointData dump_;
  std::vector<std::string> tokens_;  ///< global target tokens per batch
  std::vector<std::string> flops_;   ///< our model FLOPs per batch (real tokens)
  std::vector<std::string> kernel_flops_;  ///< our FLOPs of each padded batch, every score
  std::string weight_flops0_;  ///< batch 0's products with weights only (no scores, context)
};

/// The benchmark's batches: the corpus from the start of epoch 1 (through `prefetcher`, which
/// the caller keeps alive), or one fixed random batch.
BatchSource benchmark_batches(const RunSetup& setup, const data::PreparedData& data,
                              const BenchmarkOptions& options,
                              std::unique_ptr<data::BatchPrefetcher>& prefetcher) {
  if (options.synthetic)
    return [batch = synthetic_batch(setup, data.vocab, options)] { return batch; };
  auto planner = std::make_shared<const data::BatchPlanner>(
      data.train,
      data::plan_options(setup.data, setup.world_size, static_cast<uint64_t>(setup.train.seed)));
  prefetcher = std::make_unique<data::BatchPrefetcher>(
      data.train, planner, setup.rank, data::IteratorState{},
      data::SpecialIds{data.vocab.src.pad_id(), data.vocab.tgt.bos_id(), data.vocab.tgt.eos_id()},
      setup.data.prefetch, /*pin_memory=*/setup.device.is_cuda());
  return [p = prefetcher.get()] { return p->next(); };
}

/// Sums the figures of all ranks into `r` (memory stays per rank): the headline pass's
/// (`timed`) and the real tokens of the phase pass (`phases`, the same one without a second).
/// The hardware peak is summed per device (each rank adds its share, hardware_peak_share) and
/// is unknown (0) when any rank's is.
void reduce_over_ranks(const RunSetup& setup, const IntervalStats& timed,
                       const IntervalStats& phases, double peak_tflops,
                       const HardwarePeak& hardware, double memory_mb, BenchmarkResult& r) {
  std::vector<double> packed = {timed.src_tokens + 0.0, timed.tgt_tokens + 0.0,
                                timed.padded_tokens + 0.0, timed.flops, peak_tflops,
                                timed.kernel_flops,
                                hardware_peak_share(hardware, setup.ranks_on_device),
                                phases.src_tokens + phases.tgt_tokens + 0.0,
                                hardware.tflops > 0 ? 0.0 : 1.0};
  for (int64_t rank = 0; rank < setup.world_size; ++rank)
    packed.push_back(rank == setup.rank ? memory_mb : 0.0);
  at::Tensor sums = at::tensor(packed, at::kDouble);
  if (setup.communicator) setup.communicator->all_reduce_sum_host(sums);
  const auto summed = sums.accessor<double, 1>();
  r.real_tokens = summed[0] + summed[1];
  r.target_tokens = summed[1];
  r.padded_tokens = summed[2];
  r.flops_per_step = summed[3] / double(r.steps);
  r.peak_tflops = summed[4];
  r.kernel_flops_per_step = summed[5] / double(r.steps);
  r.hardware_peak_tflops = summed[8] > 0 ? 0.0 : summed[6];  // summed[8]: ranks not knowing it
  r.phase_real_tokens = summed[7];
  for (int64_t rank = 0; rank < setup.world_size; ++rank) r.peak_memory_mb.push_back(summed[9 + rank]);
}

}  // namespace

BenchmarkResult run_benchmark(const RunSetup& setup, const data::PreparedData& data,
                              const BenchmarkOptions& options) {
  NMT_CHECK(options.steps >= 1 && options.warmup >= 0, ConfigError,
            "--benchmark: expected at least 1 timed step and no negative warm-up, found {} and {}",
            options.steps, options.warmup);
  Updater updater(updater_setup(setup, data.vocab));
  BenchmarkResult r;
  r.ranks = setup.world_size;
  r.threads = at::get_num_threads();
  r.device = setup.device.str();
  r.amp = amp::mode_name(setup.amp.mode);
  r.synthetic = options.synthetic;
  r.warmup = options.warmup;
  r.steps = options.steps;
  r.update_freq = updater.setup().update_freq;
  r.parameters = updater.model()->parameter_count();
  // Every rank measures at once, so ranks that share a machine share it as in training.
  const double peak = measure_peak_tflops(setup.device, setup.amp.mode, 1.0, &r.peak_method);
  const HardwarePeak hardware = hardware_peak(setup.device, setup.amp.mode, r.threads);
  r.hardware_peak_source = hardware.source;

  std::unique_ptr<data::BatchPrefetcher> prefetcher;
  BatchSource next_batch = benchmark_batches(setup, data, options, prefetcher);
  std::unique_ptr<BatchDump> dump;
  if (!options.dump_batches.empty() && setup.rank == 0) {
    dump = std::make_unique<BatchDump>(updater, setup, options, hardware);
    next_batch = dump->recording(next_batch);
  }

  // The headline pass never waits for the device inside its updates, as training does not:
  // its tokens/s is what training gets. Timing phases needs a device sync at each boundary,
  // which on a GPU costs throughput, so the split comes from a second pass of phase_steps
  // synced updates. Without one the headline pass's own phase and step times serve: exact on
  // a CPU, where work is synchronous; host (enqueue) times on a GPU.
  const auto wait_for_device = [&] {
    if (setup.device.is_cuda()) dist::synchronize_cuda(setup.device.index());
  };
  const auto start_clock = [&] {
    wait_for_device();
    if (setup.communicator) setup.communicator->barrier();  // all ranks start the clock together
    return Clock::now();
  };
  at::Tensor first_loss_sum, last_loss_sum;
  int64_t first_tokens = 0, last_tokens = 0;
  int64_t step = 0;
  // Runs `count` updates; per-update times are taken only when `step_seconds` is given.
  const auto run_updates = [&](int64_t count, IntervalStats& totals,
                               std::vector<double>* step_seconds) {
    for (int64_t i = 0; i < count; ++i) {
      IntervalStats one = IntervalStats::zero(setup.device);
      const auto t0 = Clock::now();
      updater.update(++step, next_batch, one, /*want_grad_norm=*/false);
      if (step_seconds) {
        updater.sync_for_timing();
        step_seconds->push_back(seconds_since(t0));
      }
      // Read after the timing: .item() would wait for the device.
      if (step == 1) first_loss_sum = one.loss_sum, first_tokens = one.tgt_tokens;
      last_loss_sum = one.loss_sum, last_tokens = one.tgt_tokens;
      totals.add_counts(one);
    }
  };

  IntervalStats warmup = IntervalStats::zero(setup.device);
  run_updates(options.warmup, warmup, nullptr);

  const bool separate_phase_pass = options.phase_steps > 0;
  std::vector<double> step_seconds;
  IntervalStats timed = IntervalStats::zero(setup.device);
  updater.set_sync_phases(false);
  auto timed_start = start_clock();
  run_updates(options.steps, timed, separate_phase_pass ? nullptr : &step_seconds);
  wait_for_device();
  r.seconds = seconds_since(timed_start);

  IntervalStats phases = timed;
  r.phase_steps = options.steps;
  r.phase_seconds = r.seconds;
  r.phases_synced = !setup.device.is_cuda();
  if (separate_phase_pass) {
    updater.set_sync_phases(true);
    phases = IntervalStats::zero(setup.device);
    timed_start = start_clock();
    run_updates(options.phase_steps, phases, &step_seconds);
    r.phase_seconds = seconds_since(timed_start);
    r.phase_steps = options.phase_steps;
    r.phases_synced = true;
  }
  updater.set_sync_phases(false);
  r.separate_phase_pass = separate_phase_pass;
  const auto per_token = [](const at::Tensor& sum, int64_t tokens) {
    return sum.defined() ? sum.item<double>() / double(std::max<int64_t>(1, tokens)) : 0.0;
  };
  r.first_loss = per_token(first_loss_sum, first_tokens);
  r.last_loss = per_token(last_loss_sum, last_tokens);

  reduce_over_ranks(setup, timed, phases, peak, hardware, updater.peak_memory_mb(), r);
  const double n = double(r.phase_steps);
  r.step_time = summarize_step_times(step_seconds);
  r.data_wait_s = phases.data_wait_s / n;
  r.forward_s = phases.forward_s / n;
  r.backward_s = phases.backward_s / n;
  r.grad_sync_s = phases.sync_s / n;
  r.optimizer_s = phases.optimizer_s / n;
  if (dump) dump->write();
  return r;
}

}  // namespace nmt::train
