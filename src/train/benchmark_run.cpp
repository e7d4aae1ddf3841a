#include "train/benchmark_run.h"

#include <algorithm>
#include <memory>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "data/prepare.h"
#include "dist/device.h"
#include "dist/process_group.h"
#include "dist/sum_over_ranks.h"
#include "model/transformer.h"
#include "train/benchmark_dump.h"
#include "train/hardware_peak.h"
#include "train/run_setup.h"
#include "train/updater.h"
#include "util/error.h"
#include "util/timer.h"

namespace nmt::train {
namespace {

/// One batch of fixed shape: sentences of synthetic_length random ids (no padding), as many
/// as max_tokens allows.
data::BatchTensors synthetic_batch(const RunSetup& setup, const data::Vocabularies& vocab,
                                   const BenchmarkOptions& options) {
  const int64_t length = options.synthetic_length > 0 ? options.synthetic_length
                                                      : std::max<int64_t>(2, setup.data.max_len / 2);
  const int64_t sentences = std::max<int64_t>(1, setup.max_tokens / length);
  data::BatchTensors b = data::random_batch(sentences, length, vocab.src.size(), vocab.tgt.size(),
                                            batch_ids(setup.model, vocab).decoder_start);
  b.global_tgt_tokens = b.tgt_tokens * setup.world_size;
  return b;
}

/// The benchmark's batches: the corpus from the start of epoch 1 (through `prefetcher`, which
/// the caller keeps alive), or one fixed random batch.
BatchSource benchmark_batches(const RunSetup& setup, const data::PreparedData& data,
                              const BenchmarkOptions& options,
                              std::unique_ptr<data::BatchPrefetcher>& prefetcher) {
  if (options.synthetic)
    return [batch = synthetic_batch(setup, data.vocab, options)] { return batch; };
  prefetcher = first_epoch_batches(setup, data);
  return [p = prefetcher.get()] { return p->next(); };
}

/// The figures that are summed over the ranks. The hardware peak is summed per device (each
/// rank adds its share, hardware_peak_share) and is unknown when any rank's is: the ranks that
/// do not know it are counted.
struct RankTotals {
  double src_tokens = 0, tgt_tokens = 0, padded_tokens = 0;  ///< of the headline pass
  double flops = 0, kernel_flops = 0;                        ///< of the headline pass
  double peak_tflops = 0, hardware_tflops = 0;               ///< measured and datasheet peaks
  double ranks_without_peak = 0;                             ///< ranks whose datasheet is unknown
  double phase_real_tokens = 0;                              ///< of the phase pass
  std::vector<double> peak_memory_mb;                        ///< per rank (MiB)
};

/// The loss sum of one update and its target tokens; read after timing (.item() syncs).
struct UpdateLoss {
  at::Tensor sum;
  int64_t tokens = 0;
  /// Per-token loss, 0 when no update ran.
  double per_token() const {
    return sum.defined() ? sum.item<double>() / double(std::max<int64_t>(1, tokens)) : 0.0;
  }
};

/// One benchmark: the Updater, its batches, the passes and what they measured.
class BenchmarkRun {
 public:
  BenchmarkRun(const RunSetup& setup, const data::PreparedData& data,
               const BenchmarkOptions& options);
  BenchmarkResult run();

 private:
  void describe();
  void prepare_batches(const data::PreparedData& data);
  /// Runs `count` updates; per-update times are taken only when `step_seconds` is given.
  void run_updates(int64_t count, IntervalStats& totals, std::vector<double>* step_seconds);
  void wait_for_device() const;
  /// Waits for the device and for every rank, so that all ranks start the clock together.
  Clock::time_point start_clock() const;
  /// The headline pass; its own phase times serve unless a phase pass follows.
  IntervalStats headline_pass(std::vector<double>& step_seconds);
  /// The phase pass, with a device sync at every phase boundary (BenchmarkOptions::phase_steps).
  IntervalStats phase_pass(std::vector<double>& step_seconds);
  /// Sums the figures of all ranks into the result (memory stays per rank).
  void sum_over_ranks(const IntervalStats& timed, const IntervalStats& phases);

  const RunSetup& setup_;
  const BenchmarkOptions& options_;
  Updater updater_;
  BenchmarkResult r_;
  double measured_peak_ = 0;  ///< this rank's matmul ceiling (TFLOP/s)
  HardwarePeak hardware_;
  std::unique_ptr<data::BatchPrefetcher> prefetcher_;
  BatchSource next_batch_;
  std::unique_ptr<BatchDump> dump_;  ///< rank 0 with --dump-batches
  int64_t step_ = 0;
  UpdateLoss first_, last_;
};

BenchmarkRun::BenchmarkRun(const RunSetup& setup, const data::PreparedData& data,
                           const BenchmarkOptions& options)
    : setup_(setup), options_(options), updater_(updater_setup(setup, data.vocab)) {
  describe();
  // Every rank measures at once, so ranks that share a machine share it as in training.
  measured_peak_ = measure_peak_tflops(setup.device, setup.precision, 1.0, &r_.peak_method);
  hardware_ = hardware_peak(setup.device, setup.precision, static_cast<int>(r_.threads));
  r_.hardware_peak_source = hardware_.source;
  prepare_batches(data);
}

void BenchmarkRun::describe() {
  r_.ranks = setup_.world_size;
  r_.threads = at::get_num_threads();
  r_.device = setup_.device.str();
  r_.amp = amp::mode_name(setup_.precision);
  r_.synthetic = options_.synthetic;
  r_.warmup = options_.warmup;
  r_.steps = options_.steps;
  r_.update_freq = updater_.setup().update_freq;
  r_.parameters = updater_.model()->parameter_count();
}

void BenchmarkRun::prepare_batches(const data::PreparedData& data) {
  next_batch_ = benchmark_batches(setup_, data, options_, prefetcher_);
  if (options_.dump_batches.empty() || setup_.rank != 0) return;
  dump_ = std::make_unique<BatchDump>(updater_, setup_.model, setup_.config_yaml, options_, hardware_);
  next_batch_ = dump_->recording(next_batch_);
}

void BenchmarkRun::run_updates(int64_t count, IntervalStats& totals,
                               std::vector<double>* step_seconds) {
  for (int64_t i = 0; i < count; ++i) {
    IntervalStats one = IntervalStats::zero(setup_.device);
    const auto t0 = Clock::now();
    updater_.update(++step_, next_batch_, one, /*want_grad_norm=*/false);
    if (step_seconds) {
      updater_.sync_for_timing();
      step_seconds->push_back(seconds_since(t0));
    }
    if (step_ == 1) first_ = {one.loss_sum, one.tgt_tokens};
    last_ = {one.loss_sum, one.tgt_tokens};
    totals.add_counts(one);
  }
}

void BenchmarkRun::wait_for_device() const {
  if (setup_.device.is_cuda()) dist::synchronize_cuda(setup_.device.index());
}

Clock::time_point BenchmarkRun::start_clock() const {
  wait_for_device();
  if (setup_.communicator) setup_.communicator->barrier();
  return Clock::now();
}

// The headline pass never waits for the device inside its updates, as training does not: its
// tokens/s is what training gets. Timing phases needs a device sync at each boundary, which on
// a GPU costs throughput, so the split comes from a second pass of phase_steps synced updates.
// Without one the headline pass's own phase and step times serve: exact on a CPU, where work
// is synchronous; host (enqueue) times on a GPU.
IntervalStats BenchmarkRun::headline_pass(std::vector<double>& step_seconds) {
  IntervalStats timed = IntervalStats::zero(setup_.device);
  updater_.set_sync_phases(false);
  const auto start = start_clock();
  run_updates(options_.steps, timed, r_.separate_phase_pass ? nullptr : &step_seconds);
  wait_for_device();
  r_.seconds = seconds_since(start);
  r_.phase_steps = options_.steps;
  r_.phase_seconds = r_.seconds;
  r_.phases_synced = !setup_.device.is_cuda();
  return timed;
}

IntervalStats BenchmarkRun::phase_pass(std::vector<double>& step_seconds) {
  updater_.set_sync_phases(true);
  IntervalStats phases = IntervalStats::zero(setup_.device);
  const auto start = start_clock();
  run_updates(options_.phase_steps, phases, &step_seconds);
  r_.phase_seconds = seconds_since(start);
  r_.phase_steps = options_.phase_steps;
  r_.phases_synced = true;
  updater_.set_sync_phases(false);
  return phases;
}

BenchmarkResult BenchmarkRun::run() {
  IntervalStats warmup = IntervalStats::zero(setup_.device);
  run_updates(options_.warmup, warmup, nullptr);
  r_.separate_phase_pass = options_.phase_steps > 0;
  std::vector<double> step_seconds;
  const IntervalStats timed = headline_pass(step_seconds);
  const IntervalStats phases = r_.separate_phase_pass ? phase_pass(step_seconds) : timed;
  r_.first_loss = first_.per_token();
  r_.last_loss = last_.per_token();
  sum_over_ranks(timed, phases);
  const double n = double(r_.phase_steps);
  r_.step_time = summarize_step_times(step_seconds);
  r_.data_wait_s = phases.data_wait_s / n;
  r_.forward_s = phases.forward_s / n;
  r_.backward_s = phases.backward_s / n;
  r_.grad_sync_s = phases.sync_s / n;
  r_.optimizer_s = phases.optimizer_s / n;
  if (dump_) dump_->write();
  return r_;
}

void BenchmarkRun::sum_over_ranks(const IntervalStats& timed, const IntervalStats& phases) {
  RankTotals t;
  t.src_tokens = double(timed.src_tokens);
  t.tgt_tokens = double(timed.tgt_tokens);
  t.padded_tokens = double(timed.padded_tokens);
  t.flops = timed.flops;
  t.kernel_flops = timed.kernel_flops;
  t.peak_tflops = measured_peak_;
  t.hardware_tflops = hardware_peak_share(hardware_, setup_.ranks_on_device);
  t.ranks_without_peak = hardware_.tflops > 0 ? 0.0 : 1.0;
  t.phase_real_tokens = double(phases.src_tokens + phases.tgt_tokens);
  t.peak_memory_mb = dist::own_slot(setup_.rank, setup_.world_size, updater_.peak_memory_mb());
  std::vector<dist::SummedField> fields = {t.src_tokens, t.tgt_tokens, t.padded_tokens, t.flops,
                                           t.kernel_flops, t.peak_tflops, t.hardware_tflops,
                                           t.phase_real_tokens, t.ranks_without_peak};
  dist::append_fields(fields, t.peak_memory_mb);
  dist::sum_over_ranks(setup_.communicator.get(), fields);
  r_.real_tokens = t.src_tokens + t.tgt_tokens;
  r_.target_tokens = t.tgt_tokens;
  r_.padded_tokens = t.padded_tokens;
  r_.flops_per_step = t.flops / double(r_.steps);
  r_.kernel_flops_per_step = t.kernel_flops / double(r_.steps);
  r_.peak_tflops = t.peak_tflops;
  r_.hardware_peak_tflops = t.ranks_without_peak > 0 ? 0.0 : t.hardware_tflops;
  r_.phase_real_tokens = t.phase_real_tokens;
  r_.peak_memory_mb = t.peak_memory_mb;
}

}  // namespace

BenchmarkResult run_benchmark(const RunSetup& setup, const data::PreparedData& data,
                              const BenchmarkOptions& options) {
  NMT_CHECK(options.steps >= 1 && options.warmup >= 0, ConfigError,
            "--benchmark: expected at least 1 timed step and no negative warm-up, found {} and {}",
            options.steps, options.warmup);
  return BenchmarkRun(setup, data, options).run();
}

}  // namespace nmt::train
