#include "train/trainer.h"

#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/core/Generator.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/ranges.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>

#include "amp/autocast.h"
#include "amp/loss_scaler.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_tools.h"
#include "data/batch_tensors.h"
#include "data/corpus_reader.h"
#include "decode/search.h"
#include "dist/device.h"
#include "dist/gradient_reducer.h"
#include "dist/host_allocator.h"
#include "dist/process_group.h"
#include "model/transformer.h"
#include "eval/bleu.h"
#include "eval/chrf.h"
#include "model/flops.h"
#include "train/batch_fit.h"
#include "train/benchmark.h"
#include "train/grad_utils.h"
#include "train/loss.h"
#include "train/lr_schedule.h"
#include "train/metrics_log.h"
#include "train/optimizer.h"
#include "util/error.h"
#include "util/log.h"

#ifdef NMT_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace nmt::train {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_stop{false};

extern "C" void on_stop_signal(int signal_number) {
  g_stop.store(true);
  // A second signal ends the process the default way.
  std::signal(signal_number, SIG_DFL);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Checkpoint metadata keys that must exist.
constexpr const char* kStepKey = "step";

/// Tensor of a file's bytes (to keep the vocabulary inside the checkpoint).
at::Tensor file_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  NMT_CHECK(in.good(), CheckpointError, "{}: cannot read", file.string());
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

}  // namespace

void install_stop_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

bool stop_requested() { return g_stop.load(); }

/// Interval figures between two log lines.
struct Interval {
  at::Tensor loss_sum;  // device, summed per-token losses (unnormalized)
  at::Tensor nll_sum;
  int64_t tgt_tokens = 0;
  int64_t src_tokens = 0;
  int64_t padded_tokens = 0;
  int64_t updates = 0;
  double data_wait_s = 0, forward_s = 0, backward_s = 0, sync_s = 0, optimizer_s = 0;
  double flops = 0;  // model FLOPs of this rank's batches
  Clock::time_point start = Clock::now();
};

/// Outcome of one validation.
struct Validation {
  double loss = 0;              ///< per-token validation loss
  std::optional<double> bleu;   ///< with train.valid_translate
  std::optional<double> chrf;
  double selection = 0;         ///< lower is better: loss, or minus BLEU or chrF
  bool best = false;            ///< best selection so far
};

class TrainerImpl {
 public:
  TrainerImpl(TrainerSetup setup, const data::PreparedData& data)
      : s_(std::move(setup)),
        data_(data),
        checkpoints_(s_.run_dir / "checkpoints", s_.checkpoint),
        metrics_(s_.run_dir / "metrics.jsonl", s_.rank == 0) {
    // Same initial parameters on every rank; dropout streams differ per rank.
    at::manual_seed(static_cast<uint64_t>(s_.train.seed));
    model_ = model::Transformer(s_.model, data.vocab.src.size(), data.vocab.tgt.size(),
                                data.vocab.src.pad_id());
    model_->to(s_.device);
    at::manual_seed(static_cast<uint64_t>(s_.train.seed) * 1000003u +
                    static_cast<uint64_t>(s_.rank) + 1);
    std::vector<std::pair<std::string, at::Tensor>> named;
    for (const auto& item : model_->named_parameters()) named.emplace_back(item.key(), item.value());
    optimizer_ = std::make_unique<AdamOptimizer>(named, s_.train);
    for (const auto& [name, tensor] : named) params_.push_back(tensor);
    scaler_ = std::make_unique<amp::DynamicLossScaler>(s_.amp, s_.device,
                                                        s_.amp.mode == amp::AmpMode::kFp16);
    planner_ = std::make_shared<const data::BatchPlanner>(
        data.train.cache, data::plan_options(s_.data, s_.world_size,
                                             static_cast<uint64_t>(s_.train.seed)));
    update_freq_ = data::resolve_update_freq(s_.data, s_.world_size);
    // The loss is a sum over tokens, so its weight gradients are about as many times larger
    // than a mean loss's as an update has target tokens. Under fp16 loss scaling that would
    // overflow half precision until the scale had fallen by that factor, skipping the first
    // ~log2(tokens) updates; so the summed loss is divided by a fixed bound of the update's
    // target tokens before scaling, and unscaling multiplies it back. Exact up to rounding;
    // without fp16 the loss is left as it is.
    if (scaler_->enabled())
      loss_normalizer_ = double(s_.data.max_tokens) * double(s_.world_size) * double(update_freq_);
    if (s_.train.valid_translate && data.valid) {
      data::LineReader reader(s_.data.valid_tgt);
      for (std::string line; reader.next(&line);) valid_references_.push_back(line);
    }
    steps_per_epoch_ = planner_->plan_epoch(1).steps.size();
    log::info("train", "model: {} parameters; {} steps per epoch, update_freq {}",
              model_->parameter_count(), steps_per_epoch_, update_freq_);
    if (comm()) {
      check_ranks_agree();
      // Every rank starts from rank 0's parameters.
      {
        at::NoGradGuard no_grad;
        comm()->broadcast(params_, 0);
      }
      reducer_ = std::make_unique<dist::GradientReducer>(
          params_, s_.communicator,
          dist::GradientReducerOptions{s_.dist.bucket_mb, s_.dist.overlap});
      log::info("train", "{} ranks ({}); gradients summed in {} bucket(s) of about {} MB{}",
                comm()->world_size(), comm()->backend_name(), reducer_->num_buckets(),
                s_.dist.bucket_mb, s_.dist.overlap ? ", overlapping backward" : ", after backward");
    }
  }

  dist::Communicator* comm() const { return s_.communicator.get(); }

  /// Peak memory of this rank so far (MiB): allocated on its GPU, or resident on the host.
  double peak_memory_mb() const {
    return double(s_.device.is_cuda() ? dist::peak_cuda_memory_bytes(s_.device.index())
                                      : dist::peak_host_memory_bytes()) /
           (1 << 20);
  }

  /// Refuses to train together unless every rank has the same config, vocabulary and model.
  void check_ranks_agree() {
    const std::string mine = fmt::format("config {} | vocabulary {} | {} parameters",
                                         s_.config_hash, vocab_fingerprint(),
                                         model_->parameter_count());
    const std::vector<std::string> all = comm()->all_gather_strings(mine);
    for (size_t r = 1; r < all.size(); ++r) {
      NMT_CHECK(all[r] == all[0], DistError,
                "ranks disagree: rank 0 has {}, rank {} has {}; every rank must run the same "
                "config (compare with --print-config) and data",
                all[0], r, all[r]);
    }
  }

  void restore(const checkpoint::CheckpointData& saved, const std::filesystem::path& file) {
    const std::string where = file.string();
    // The model must have the same tensors of the same shapes: name the first difference.
    for (const auto& item : model_->named_parameters()) {
      const at::Tensor* t = saved.find("model." + item.key());
      NMT_CHECK(t != nullptr, CheckpointError,
                "{}: no tensor model.{}: the checkpoint is of a different model shape than the "
                "config (model.*)",
                where, item.key());
      NMT_CHECK(t->sizes() == item.value().sizes(), CheckpointError,
                "{}: model.{} has shape {} in the checkpoint but {} in the config's model "
                "(check model.* and data.vocab_size)",
                where, item.key(), fmt::join(t->sizes(), "x"), fmt::join(item.value().sizes(), "x"));
    }
    const std::string& vocab = saved.meta("vocab_fingerprint");
    NMT_CHECK(vocab == vocab_fingerprint(), CheckpointError,
              "{}: vocabulary differs: checkpoint fingerprint {}, this run's {} ({})", where, vocab,
              vocab_fingerprint(), data_.vocab.src.model_path().string());
    const int64_t world = std::stoll(saved.meta("world_size"));
    NMT_CHECK(world == s_.world_size, CheckpointError,
              "{}: saved with {} ranks, resumed with {}: the batch plan differs, so exact resume is "
              "impossible (run with the same number of ranks)",
              where, world, s_.world_size);
    {
      at::NoGradGuard no_grad;
      for (const auto& item : model_->named_parameters())
        item.value().copy_(saved.at("model." + item.key()));
    }
    auto find = [&saved](std::string_view name) { return saved.find(name); };
    optimizer_->load_state(find);
    scaler_->load_state(find);
    step_ = std::stoll(saved.meta(kStepKey));
    iterator_ = {std::stoll(saved.meta("iterator_epoch")), std::stoll(saved.meta("iterator_step"))};
    elapsed_before_ = std::stod(saved.meta("elapsed_s"));
    // Early-stopping state continues across the resume.
    if (auto it = saved.metadata.find("best_selection"); it != saved.metadata.end())
      best_selection_ = std::stod(it->second);
    if (auto it = saved.metadata.find("validations_without_improvement"); it != saved.metadata.end())
      validations_without_improvement_ = std::stoll(it->second);
    // Random streams last, so nothing above consumes from the restored state.
    auto cpu_gen = at::detail::getDefaultCPUGenerator();
    {
      std::lock_guard<std::mutex> lock(cpu_gen.mutex());
      cpu_gen.set_state(saved.at(fmt::format("rng.cpu.{}", s_.rank)));
    }
#ifdef NMT_WITH_CUDA
    if (s_.device.is_cuda()) {
      auto gen = at::cuda::detail::getDefaultCUDAGenerator(s_.device.index());
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(saved.at(fmt::format("rng.cuda.{}", s_.rank)));
    }
#endif
    log::info("train", "resumed from {} at step {} (epoch {}, step {} of the epoch)", where, step_,
              iterator_.epoch, iterator_.step);
  }

  TrainSummary run() {
    TrainSummary summary;
    const auto start = Clock::now();
    if (s_.train.max_steps > 0 && step_ >= s_.train.max_steps) {
      log::warn("train", "already at step {} of train.max_steps {}: nothing to do", step_,
                s_.train.max_steps);
      summary.steps = step_;
      return summary;
    }
    data::BatchPrefetcher batches(data_.train.cache, planner_, s_.rank, iterator_,
                                  {data_.vocab.src.pad_id(), data_.vocab.tgt.bos_id(),
                                   data_.vocab.tgt.eos_id()},
                                  s_.data.prefetch);
    const bool progress = s_.rank == 0 && ::isatty(STDERR_FILENO) && log::enabled(log::Level::kInfo);
    const auto next_batch = [&batches] { return batches.next(); };
    Interval interval = new_interval();
    int64_t last_saved = -1;
    int64_t last_validated = -1;
    int64_t epoch = iterator_.epoch;
    for (;;) {
      if (s_.train.max_steps > 0 && step_ >= s_.train.max_steps) break;
      if (s_.train.max_epochs > 0 && iterator_.epoch > s_.train.max_epochs) break;
      bool by_signal = false;
      if (should_stop(start, &by_signal)) {
        summary.stopped_by_signal = by_signal;
        if (!by_signal) log::info("train", "train.max_minutes ({}) reached", s_.train.max_minutes);
        break;
      }
      epoch = train_update(next_batch, interval);
      ++step_;
      if (progress) print_progress(start);
      if (step_ % s_.train.log_every == 0) {
        if (progress) clear_progress();
        summary.last_train_loss = log_interval(interval, start, epoch);
        interval = new_interval();
      }
      std::optional<Validation> validation;
      if (s_.train.valid_every > 0 && step_ % s_.train.valid_every == 0 && data_.valid) {
        if (progress) clear_progress();
        validation = validate(epoch);
        last_validated = step_;
      }
      if (step_ % s_.checkpoint.every_steps == 0 || validation) {
        save(epoch, validation, start);
        last_saved = step_;
      }
      if (s_.train.patience > 0 && validations_without_improvement_ >= s_.train.patience) {
        log::info("train", "early stop: {} validations without improvement of {}",
                  validations_without_improvement_, metric_name());
        summary.early_stopped = true;
        break;
      }
    }
    if (progress) clear_progress();
    if (interval.updates > 0) summary.last_train_loss = log_interval(interval, start, epoch);
    std::optional<Validation> validation;
    if (data_.valid && s_.train.valid_every > 0 && last_validated != step_ && step_ > 0)
      validation = validate(epoch);
    if (last_saved != step_ && step_ > 0) save(epoch, validation, start);
    // Every rank logs this; equal hashes across rank logs show the replicas stayed identical.
    checkpoint::CheckpointData params;
    for (const auto& item : model_->named_parameters())
      params.tensors.emplace_back("model." + item.key(), item.value().detach().cpu());
    const double peak_mb = peak_memory_mb();
    log::info("train", "parameter hash {:016x} at step {}; peak memory {:.0f} MiB",
              checkpoint::model_parameter_hash(params), step_, peak_mb);
    summary.steps = step_;
    summary.epoch = epoch;
    summary.last_valid_loss = last_valid_loss_;
    summary.last_checkpoint = last_checkpoint_;
    if (summary.stopped_by_signal)
      log::info("train", "stopped by signal at step {}; checkpoint {}", step_,
                last_checkpoint_.string());
    return summary;
  }

  MaxTokensFit fit_max_tokens(int64_t ranks_per_device) {
    constexpr double kMiB = 1 << 20;
    const auto start = Clock::now();
    const data::DataOptions& d = s_.data;
    const bool cuda = s_.device.is_cuda();
    const int index = cuda ? s_.device.index() : -1;
    MaxTokensFit fit;
    const data::TokenCache& corpus = data_.train.cache;
    fit.length = 2;
    for (int64_t i = 0; i < corpus.size(); ++i)
      fit.length = std::max({fit.length, corpus.src_length(i) + 1, corpus.tgt_length(i) + 1});
    if (!cuda && d.auto_memory_mb == 0) {
      fit.fallback = "on CPU there is no device memory to fill (set data.auto_memory_mb to fit a "
                     "host memory budget)";
    } else if (!cuda && !dist::host_allocator_installed()) {
      fit.fallback = "on CPU the peak is measured by the caching host allocator, which "
                     "train.cache_host_memory: false turns off";
    }
    int64_t memory = d.auto_memory_mb * (int64_t{1} << 20);
    // Every rank reads the device's free memory before any of them probes.
    if (comm()) comm()->barrier();
    if (fit.fallback.empty() && memory == 0) {
      const dist::CudaMemory m = dist::cuda_memory(index);
      // What this rank holds already, plus its share of what no one holds.
      memory = m.reserved + m.free / std::max<int64_t>(1, ranks_per_device);
    }
    if (comm()) comm()->barrier();
    int64_t mine = data::unmeasured_max_tokens(d);
    std::string failure;  // why this rank found no fit: every rank must hear it, or they hang
    if (fit.fallback.empty()) {
      fit.memory_mb = double(memory) / kMiB;
      fit.limit_mb = fit.memory_mb * d.auto_memory_fraction;
      // With several ranks, the all-reduce buckets (one flat copy of the gradients) are
      // allocated at the first update, and probes do not sync: count them here.
      int64_t bucket_bytes = 0;
      if (reducer_) {
        reducer_->set_sync(false);
        for (const at::Tensor& p : params_) bucket_bytes += p.numel() * static_cast<int64_t>(p.element_size());
      }
      model_->train();
      const auto measure = [&](int64_t sentences) -> std::optional<int64_t> {
        optimizer_->zero_grad();
        if (cuda) {
          dist::synchronize_cuda(index);
          dist::reset_peak_cuda_memory(index);
        } else {
          dist::reset_host_allocator_peak();
        }
        try {
          const data::BatchTensors batch = synthetic_batch(sentences, fit.length);
          backward(forward(batch.src.to(s_.device), batch.tgt_in.to(s_.device),
                           batch.tgt_out.to(s_.device)));
          dist::synchronize_cuda(index);
        } catch (const c10::OutOfMemoryError&) {
          optimizer_->zero_grad();
          dist::release_cached_cuda_memory();
          log::debug("train", "max_tokens auto: {} x {} tokens: out of memory", sentences, fit.length);
          return std::nullopt;
        }
        const int64_t peak = (cuda ? dist::peak_cuda_memory_bytes(index)
                                   : dist::host_allocator_stats().peak_in_use_bytes) +
                             bucket_bytes;
        optimizer_->zero_grad();
        log::debug("train", "max_tokens auto: {} x {} tokens: peak {:.0f} MiB", sentences,
                   fit.length, double(peak) / kMiB);
        return peak;
      };
      BatchFitOptions options;
      options.limit_bytes = static_cast<int64_t>(fit.limit_mb * kMiB);
      options.max_sentences = d.auto_max_tokens_limit / fit.length;
      if (d.max_sentences > 0) options.max_sentences = std::min(options.max_sentences, d.max_sentences);
      options.first_guess = std::max<int64_t>(2, 4096 / fit.length);
      try {
        const BatchFitResult result = fit_batch(measure, options);
        fit.sentences = result.sentences;
        fit.peak_mb = double(result.peak_bytes) / kMiB;
        fit.probes = static_cast<int64_t>(result.probes.size());
        mine = result.sentences * fit.length;
      } catch (const Error& e) {
        failure = fmt::format("rank {}: {} (sentences of {} tokens, the longest in {}; "
                              "data.auto_memory_mb and data.auto_memory_fraction set the limit)",
                              s_.rank, e.what(), fit.length, d.train_src);
      }
    }
    fit.max_tokens = mine;
    std::vector<std::string> all{failure.empty() ? std::to_string(mine) : failure};
    if (comm()) all = comm()->all_gather_strings(all[0]);
    for (const std::string& other : all) {
      NMT_CHECK(!other.empty() && std::isdigit(static_cast<unsigned char>(other[0])), ConfigError,
                "data.max_tokens auto: {}", other);
      fit.max_tokens = std::min<int64_t>(fit.max_tokens, std::stoll(other));
    }
    fit.seconds = seconds_since(start);
    return fit;
  }

  BenchmarkResult benchmark(const BenchmarkOptions& options) {
    NMT_CHECK(options.steps >= 1 && options.warmup >= 0, ConfigError,
              "--benchmark: expected at least 1 timed step and no negative warm-up, found {} and {}",
              options.steps, options.warmup);
    BenchmarkResult r;
    r.ranks = s_.world_size;
    r.threads = at::get_num_threads();
    r.device = s_.device.str();
    r.amp = amp::mode_name(s_.amp.mode);
    r.synthetic = options.synthetic;
    r.warmup = options.warmup;
    r.steps = options.steps;
    r.update_freq = update_freq_;
    r.parameters = model_->parameter_count();
    // Every rank measures at once, so ranks that share a machine share it as in training.
    const double peak = measure_peak_tflops(s_.device, s_.amp.mode, 1.0, &r.peak_method);

    // Batches: the corpus from the start of epoch 1, or one fixed random batch.
    std::unique_ptr<data::BatchPrefetcher> prefetcher;
    std::function<data::BatchTensors()> next_batch;
    if (options.synthetic) {
      next_batch = [batch = synthetic_batch(options)] { return batch; };
    } else {
      prefetcher = std::make_unique<data::BatchPrefetcher>(
          data_.train.cache, planner_, s_.rank, data::IteratorState{},
          data::SpecialIds{data_.vocab.src.pad_id(), data_.vocab.tgt.bos_id(),
                           data_.vocab.tgt.eos_id()},
          s_.data.prefetch);
      next_batch = [&prefetcher] { return prefetcher->next(); };
    }
    const bool dump = !options.dump_batches.empty() && s_.rank == 0;
    checkpoint::CheckpointData dumped;
    std::vector<std::string> dumped_tokens;  // global target tokens per batch
    std::vector<std::string> dumped_flops;   // our training FLOPs per batch
    if (dump) {
      for (const auto& item : model_->named_parameters())
        dumped.tensors.emplace_back("model." + item.key(), item.value().detach().clone().cpu());
      next_batch = [&, inner = next_batch] {
        data::BatchTensors batch = inner();
        const size_t i = dumped_tokens.size();
        dumped.tensors.emplace_back(fmt::format("batch.{}.src", i), batch.src);
        dumped.tensors.emplace_back(fmt::format("batch.{}.tgt_in", i), batch.tgt_in);
        dumped.tensors.emplace_back(fmt::format("batch.{}.tgt_out", i), batch.tgt_out);
        dumped_tokens.push_back(std::to_string(batch.global_tgt_tokens));
        dumped_flops.push_back(fmt::format(
            "{}", model::training_flops(s_.model, data_.vocab.tgt.size(), batch.src.size(0),
                                        batch.src.size(1), batch.tgt_out.size(1))));
        return batch;
      };
    }

    sync_phases_ = true;
    std::vector<double> step_seconds;
    Interval timed = new_interval();
    Clock::time_point timed_start;
    for (int64_t i = 0; i < options.warmup + options.steps; ++i) {
      if (i == options.warmup) {
        sync_for_timing();
        if (comm()) comm()->barrier();  // all ranks start the clock together
        timed = new_interval();
        timed_start = Clock::now();
      }
      Interval one = new_interval();
      const auto t0 = Clock::now();
      train_update(next_batch, one);
      sync_for_timing();
      const double seconds = seconds_since(t0);
      ++step_;
      if (i == 0 || i + 1 == options.warmup + options.steps) {
        const double loss = one.loss_sum.item<double>() / double(std::max<int64_t>(1, one.tgt_tokens));
        (i == 0 ? r.first_loss : r.last_loss) = loss;
      }
      if (i < options.warmup) continue;
      step_seconds.push_back(seconds);
      timed.data_wait_s += one.data_wait_s;
      timed.forward_s += one.forward_s;
      timed.backward_s += one.backward_s;
      timed.sync_s += one.sync_s;
      timed.optimizer_s += one.optimizer_s;
      timed.flops += one.flops;
      timed.src_tokens += one.src_tokens;
      timed.tgt_tokens += one.tgt_tokens;
      timed.padded_tokens += one.padded_tokens;
    }
    r.seconds = seconds_since(timed_start);
    sync_phases_ = false;

    // Token and FLOP counts sum over ranks; the peak too (each rank computes on its share of
    // the machine); memory is per rank.
    const int64_t world = s_.world_size;
    std::vector<double> packed = {timed.src_tokens + 0.0, timed.tgt_tokens + 0.0,
                                  timed.padded_tokens + 0.0, timed.flops, peak};
    const double my_memory = peak_memory_mb();
    for (int64_t rank = 0; rank < world; ++rank) packed.push_back(rank == s_.rank ? my_memory : 0.0);
    at::Tensor sums = at::tensor(packed, at::kDouble);
    all_reduce_cpu(sums);
    const auto summed = sums.accessor<double, 1>();
    r.real_tokens = summed[0] + summed[1];
    r.target_tokens = summed[1];
    r.padded_tokens = summed[2];
    r.flops_per_step = summed[3] / double(options.steps);
    r.peak_tflops = summed[4];
    for (int64_t rank = 0; rank < world; ++rank) r.peak_memory_mb.push_back(summed[5 + rank]);
    const double n = double(options.steps);
    r.step_time = summarize_step_times(step_seconds);
    r.data_wait_s = timed.data_wait_s / n;
    r.forward_s = timed.forward_s / n;
    r.backward_s = timed.backward_s / n;
    r.grad_sync_s = timed.sync_s / n;
    r.optimizer_s = timed.optimizer_s / n;

    if (dump) {
      dumped.metadata = dump_metadata(options);
      dumped.metadata["batch_global_tgt_tokens"] = fmt::format("{}", fmt::join(dumped_tokens, ","));
      dumped.metadata["batch_training_flops"] = fmt::format("{}", fmt::join(dumped_flops, ","));
      dumped.metadata["batches"] = std::to_string(dumped_tokens.size());
      checkpoint::save_checkpoint(options.dump_batches, dumped);
      log::info("benchmark", "wrote {} batches and the initial parameters to {}",
                dumped_tokens.size(), options.dump_batches.string());
    }
    return r;
  }

 private:
  /// One batch of fixed shape: sentences of synthetic_length random ids (no padding), as
  /// many as max_tokens allows.
  data::BatchTensors synthetic_batch(const BenchmarkOptions& options) const {
    const int64_t length = options.synthetic_length > 0
                               ? options.synthetic_length
                               : std::max<int64_t>(2, s_.data.max_len / 2);
    return synthetic_batch(std::max<int64_t>(1, s_.data.max_tokens / length), length);
  }

  /// `sentences` sentences of `length` random ids on both sides (no padding).
  data::BatchTensors synthetic_batch(int64_t sentences, int64_t length) const {
    // Ids above the special ones, from a fixed stream independent of the training seed.
    at::Generator generator = at::detail::createCPUGenerator(12345);
    const int64_t first = 4;
    const auto random_ids = [&](int64_t vocab) {
      return at::randint(first, std::max(first + 1, vocab), {sentences, length}, generator,
                         at::kLong);
    };
    data::BatchTensors b;
    b.src = random_ids(data_.vocab.src.size());
    b.tgt_out = random_ids(data_.vocab.tgt.size());
    b.tgt_in = at::cat({at::full({sentences, 1}, data_.vocab.tgt.bos_id(), at::kLong),
                        b.tgt_out.slice(1, 0, length - 1)},
                       1);
    b.src_tokens = sentences * length;
    b.tgt_tokens = sentences * length;
    b.global_tgt_tokens = b.tgt_tokens * s_.world_size;
    b.epoch = 1;
    return b;
  }

  /// What scripts/bench/reference_train.py needs to build the same model and optimizer.
  std::map<std::string, std::string> dump_metadata(const BenchmarkOptions& options) const {
    const model::ModelOptions& m = s_.model;
    const TrainOptions& t = s_.train;
    return {
        {"model.encoder_layers", std::to_string(m.encoder_layers)},
        {"model.decoder_layers", std::to_string(m.decoder_layers)},
        {"model.d_model", std::to_string(m.d_model)},
        {"model.heads", std::to_string(m.heads)},
        {"model.ffn_dim", std::to_string(m.ffn_dim)},
        {"model.dropout", fmt::format("{}", m.dropout)},
        {"model.attention_dropout", fmt::format("{}", m.attention_dropout)},
        {"model.activation_dropout", fmt::format("{}", m.activation_dropout)},
        {"model.activation", m.activation == model::Activation::kGelu ? "gelu" : "relu"},
        {"model.norm", m.norm == model::NormPosition::kPre ? "pre" : "post"},
        {"model.positions",
         m.positions == model::PositionEncoding::kLearned ? "learned" : "sinusoidal"},
        {"model.max_positions", std::to_string(m.max_positions)},
        {"model.tie_embeddings", m.tie_embeddings == model::TiedEmbeddings::kAll       ? "all"
                                 : m.tie_embeddings == model::TiedEmbeddings::kDecoder ? "decoder"
                                                                                       : "none"},
        {"model.scale_embeddings", m.scale_embeddings ? "true" : "false"},
        {"vocab.src_size", std::to_string(data_.vocab.src.size())},
        {"vocab.tgt_size", std::to_string(data_.vocab.tgt.size())},
        {"vocab.pad_id", std::to_string(data_.vocab.tgt.pad_id())},
        {"train.optimizer", t.optimizer == Optimizer::kAdamW ? "adamw" : "adam"},
        {"train.lr", fmt::format("{}", t.lr)},
        {"train.schedule", t.schedule == LrSchedule::kInverseSqrt ? "inverse_sqrt"
                           : t.schedule == LrSchedule::kCosine    ? "cosine"
                                                                  : "constant"},
        {"train.warmup_steps", std::to_string(t.warmup_steps)},
        {"train.max_steps", std::to_string(t.max_steps)},
        {"train.adam_beta1", fmt::format("{}", t.adam_beta1)},
        {"train.adam_beta2", fmt::format("{}", t.adam_beta2)},
        {"train.adam_eps", fmt::format("{}", t.adam_eps)},
        {"train.weight_decay", fmt::format("{}", t.weight_decay)},
        {"train.clip_norm", fmt::format("{}", t.clip_norm)},
        {"train.label_smoothing", fmt::format("{}", t.label_smoothing)},
        {"train.seed", std::to_string(t.seed)},
        {"amp.mode", amp::mode_name(s_.amp.mode)},
        {"benchmark.warmup", std::to_string(options.warmup)},
        {"benchmark.steps", std::to_string(options.steps)},
        {"benchmark.update_freq", std::to_string(update_freq_)},
        {"benchmark.synthetic", options.synthetic ? "true" : "false"},
        {"benchmark.threads", std::to_string(at::get_num_threads())},
    };
  }

  Interval new_interval() const {
    Interval i;
    i.loss_sum = at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(s_.device));
    i.nll_sum = at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(s_.device));
    return i;
  }

  /// In benchmark mode, waits for the device so that each phase's time is its own; training
  /// never waits (CPU work is synchronous anyway).
  void sync_for_timing() const {
    if (sync_phases_ && s_.device.is_cuda()) dist::synchronize_cuda(s_.device.index());
  }

  /// The loss of a batch on the device, under autocast.
  LossSums forward(const at::Tensor& src, const at::Tensor& tgt_in, const at::Tensor& tgt_out) {
    amp::AutocastScope autocast(s_.amp.mode, s_.device.type());
    const at::Tensor logits = model_->forward(src, tgt_in);
    return label_smoothed_cross_entropy(logits, tgt_out, s_.train.label_smoothing,
                                        data_.vocab.tgt.pad_id());
  }

  /// Adds the gradients of a batch's loss, scaled for fp16.
  void backward(const LossSums& sums) {
    scaler_->scale(loss_normalizer_ == 1.0 ? sums.loss : sums.loss / loss_normalizer_).backward();
  }

  /// One optimizer update over update_freq batches from next_batch; returns the epoch of its
  /// last batch.
  int64_t train_update(const std::function<data::BatchTensors()>& next_batch, Interval& interval) {
    model_->train();
    optimizer_->zero_grad();
    int64_t update_tokens = 0;
    int64_t epoch = iterator_.epoch;
    for (int64_t k = 0; k < update_freq_; ++k) {
      const auto wait_start = Clock::now();
      data::BatchTensors batch = next_batch();
      interval.data_wait_s += seconds_since(wait_start);
      update_tokens += batch.global_tgt_tokens;
      iterator_ = batch.next;
      epoch = batch.epoch;
      interval.tgt_tokens += batch.tgt_tokens;
      interval.src_tokens += batch.src_tokens;
      interval.padded_tokens += batch.src.numel() + batch.tgt_out.numel();
      if (reducer_) reducer_->set_sync(k + 1 == update_freq_);
      if (batch.empty()) continue;  // a rank without data this step still joins the update
      const bool non_blocking = s_.device.is_cuda();
      const at::Tensor src = batch.src.to(s_.device, non_blocking);
      const at::Tensor tgt_in = batch.tgt_in.to(s_.device, non_blocking);
      const at::Tensor tgt_out = batch.tgt_out.to(s_.device, non_blocking);
      interval.flops += model::training_flops(s_.model, data_.vocab.tgt.size(), src.size(0),
                                              src.size(1), tgt_out.size(1));
      sync_for_timing();
      auto t0 = Clock::now();
      const LossSums sums = forward(src, tgt_in, tgt_out);
      sync_for_timing();
      auto t1 = Clock::now();
      backward(sums);
      sync_for_timing();
      auto t2 = Clock::now();
      interval.forward_s += std::chrono::duration<double>(t1 - t0).count();
      interval.backward_s += std::chrono::duration<double>(t2 - t1).count();
      interval.loss_sum.add_(sums.loss.detach());
      interval.nll_sum.add_(sums.nll);
    }
    // One mark per update, where a rank enters the gradient all-reduce: peers name a rank that
    // stalls before it (a failed collective reports who is behind), at one store write a step.
    if (comm()) comm()->mark_progress(fmt::format("step {}: backward done", step_ + 1));
    auto t0 = Clock::now();
    if (reducer_) {
      reducer_->finalize();  // .grad is now the sum over all ranks
      sync_for_timing();
      interval.sync_s += seconds_since(t0);
      t0 = Clock::now();
    }
    std::vector<at::Tensor> grads;
    grads.reserve(params_.size());
    for (at::Tensor& p : params_) {
      // A parameter no batch reached (e.g. all ranks empty) gets a zero gradient.
      if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
      grads.push_back(p.grad());
    }
    // Loss is a sum over tokens: dividing by the update's global target-token count makes the
    // result independent of how tokens are split across ranks and accumulation steps.
    const at::Tensor divisor =
        at::full({}, static_cast<double>(std::max<int64_t>(1, update_tokens)) / loss_normalizer_,
                 at::TensorOptions().dtype(at::kFloat).device(s_.device));
    scaler_->unscale_(grads, divisor);
    // The norm is needed to clip, else only for the log line: skip the pass over every
    // gradient when neither wants it.
    if (s_.train.clip_norm > 0 || (step_ + 1) % s_.train.log_every == 0)
      last_grad_norm_ = clip_grad_norm_(grads, s_.train.clip_norm);
    optimizer_->step(learning_rate(s_.train, step_ + 1), &scaler_->found_inf());
    scaler_->update();
    sync_for_timing();
    interval.optimizer_s += seconds_since(t0);
    ++interval.updates;
    return epoch;
  }

  double log_interval(Interval& interval, Clock::time_point start, int64_t epoch) {
    // The one host-device synchronization of the interval.
    scaler_->check(step_);
    const auto scaler = scaler_->stats();
    // Loss and token counts over all ranks (one small all-reduce per log step).
    at::Tensor sums = at::stack({interval.loss_sum.to(at::kDouble).cpu(), interval.nll_sum.to(at::kDouble).cpu(),
                                 at::scalar_tensor(double(interval.tgt_tokens), at::kDouble),
                                 at::scalar_tensor(double(interval.src_tokens), at::kDouble),
                                 at::scalar_tensor(double(interval.padded_tokens), at::kDouble)});
    all_reduce_cpu(sums);
    const auto summed = sums.accessor<double, 1>();
    const double tokens = std::max(1.0, summed[2]);
    const double loss = summed[0] / tokens;
    const double nll = summed[1] / tokens;
    const double grad_norm = last_grad_norm_.defined() ? last_grad_norm_.item<double>() : 0.0;
    const double seconds = std::max(1e-9, seconds_since(interval.start));
    const double tokens_per_s = (summed[2] + summed[3]) / seconds;
    const double data_wait = interval.data_wait_s;
    const double elapsed = elapsed_before_ + seconds_since(start);
    const double eta = eta_seconds(start);
    const double lr = learning_rate(s_.train, step_);
    const double peak_mb = peak_memory_mb();
    log::info("train",
              "step {}{} | epoch {} | loss {:.4f} | nll {:.4f} | ppl {:.2f} | lr {:.3g} | {:.0f} "
              "tok/s | gnorm {:.3f} | scale {:g} | {} MiB | {} elapsed, ETA {}",
              step_, s_.train.max_steps > 0 ? fmt::format("/{}", s_.train.max_steps) : "", epoch,
              loss, nll, std::exp(std::min(nll, 50.0)), lr, tokens_per_s, grad_norm, scaler.scale,
              static_cast<int64_t>(peak_mb), format_duration(elapsed), format_duration(eta));
    if (scaler.skipped_total > skipped_logged_) {
      log::warn("train", "{} update(s) skipped for non-finite gradients so far (loss scale now {:g})",
                scaler.skipped_total, scaler.scale);
      skipped_logged_ = scaler.skipped_total;
    }
    metrics_.write({{"type", "\"train\""},
                    {"step", fmt::format("{}", step_)},
                    {"epoch", fmt::format("{}", epoch)},
                    {"loss", json_number(loss)},
                    {"nll", json_number(nll)},
                    {"ppl", json_number(std::exp(std::min(nll, 50.0)))},
                    {"lr", json_number(lr)},
                    {"tokens_per_s", json_number(tokens_per_s)},
                    {"padded_tokens_per_s", json_number(summed[4] / seconds)},
                    {"grad_norm", json_number(grad_norm)},
                    {"loss_scale", json_number(scaler.scale)},
                    {"skipped_updates", fmt::format("{}", scaler.skipped_total)},
                    {"peak_memory_mb", json_number(peak_mb)},
                    {"data_wait_s", json_number(data_wait)},
                    {"forward_s", json_number(interval.forward_s)},
                    {"backward_s", json_number(interval.backward_s)},
                    {"grad_sync_s", json_number(interval.sync_s)},
                    {"optimizer_s", json_number(interval.optimizer_s)},
                    {"interval_s", json_number(seconds)},
                    {"elapsed_s", json_number(elapsed)},
                    {"eta_s", json_number(eta)}});
    return loss;
  }

  /// Sums a small CPU tensor over all ranks (a no-op for one process). NCCL reduces device
  /// tensors only, so the tensor makes a round trip to the device there.
  void all_reduce_cpu(at::Tensor& t) {
    if (!comm()) return;
    std::vector<at::Tensor> tensors{s_.device.is_cuda() ? t.to(s_.device) : t};
    comm()->all_reduce_sum(tensors);
    t = tensors[0].cpu();
  }

  /// True when the run must stop now. With several ranks the ranks agree (at log steps only, so
  /// no update waits for it): a signal or a time limit seen by any rank stops all of them.
  bool should_stop(Clock::time_point start, bool* by_signal) {
    const bool out_of_time =
        s_.train.max_minutes > 0 && seconds_since(start) >= 60.0 * s_.train.max_minutes;
    if (!comm()) {
      *by_signal = stop_requested();
      return *by_signal || out_of_time;
    }
    if (step_ % s_.train.log_every != 0) return false;
    at::Tensor flags = at::tensor({stop_requested() ? 1.0 : 0.0, out_of_time ? 1.0 : 0.0}, at::kDouble);
    all_reduce_cpu(flags);
    *by_signal = flags[0].item<double>() > 0;
    return *by_signal || flags[1].item<double>() > 0;
  }

  double eta_seconds(Clock::time_point start) const {
    const double done = double(step_ - first_step_);
    if (done <= 0) return NAN;
    const double per_step = seconds_since(start) / done;
    double eta = s_.train.max_steps > 0 ? per_step * double(s_.train.max_steps - step_) : NAN;
    if (s_.train.max_minutes > 0) {
      const double left = 60.0 * s_.train.max_minutes - seconds_since(start);
      eta = std::isfinite(eta) ? std::min(eta, left) : left;
    }
    return eta;
  }

  void print_progress(Clock::time_point start) const {
    std::fprintf(stderr, "\r\033[K[train] step %lld%s | %s elapsed | ETA %s",
                 static_cast<long long>(step_),
                 s_.train.max_steps > 0 ? fmt::format("/{}", s_.train.max_steps).c_str() : "",
                 format_duration(elapsed_before_ + seconds_since(start)).c_str(),
                 format_duration(eta_seconds(start)).c_str());
    std::fflush(stderr);
  }
  static void clear_progress() {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }

  /// Loss (and, with train.valid_translate, BLEU and chrF) over the validation set, each rank
  /// taking its share; decides whether this is the best checkpoint so far and counts the
  /// validations without improvement for early stopping.
  Validation validate(int64_t epoch) {
    const auto start = Clock::now();
    model_->eval();
    at::NoGradGuard no_grad;
    const data::BatchPlanner planner(
        data_.valid->cache,
        data::plan_options(s_.data, s_.world_size, static_cast<uint64_t>(s_.train.seed)));
    const data::EpochPlan plan = planner.plan_epoch(1);
    at::Tensor loss = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(s_.device));
    at::Tensor nll = at::zeros_like(loss);
    int64_t tokens = 0;
    const data::SpecialIds ids{data_.vocab.src.pad_id(), data_.vocab.tgt.bos_id(),
                               data_.vocab.tgt.eos_id()};
    std::vector<std::string> hypotheses, references;
    for (const data::Step& step : plan.steps) {
      const data::Batch& batch = step.batches[static_cast<size_t>(s_.rank)];
      if (batch.size() == 0) continue;
      const auto t = data::make_batch_tensors(data_.valid->cache, batch, ids);
      amp::AutocastScope autocast(s_.amp.mode, s_.device.type());
      const at::Tensor src = t.src.to(s_.device);
      const at::Tensor logits = model_->forward(src, t.tgt_in.to(s_.device));
      const LossSums sums = label_smoothed_cross_entropy(logits, t.tgt_out.to(s_.device),
                                                         s_.train.label_smoothing,
                                                         data_.vocab.tgt.pad_id());
      loss.add_(sums.loss.to(at::kDouble));
      nll.add_(sums.nll.to(at::kDouble));
      tokens += t.tgt_tokens;
      if (!s_.train.valid_translate) continue;
      decode::SearchOptions search;
      search.beam = s_.train.valid_beam;
      search.nbest = 1;
      const auto found = decode::search(*model_, src, {ids.bos, ids.eos, ids.pad}, search);
      for (size_t row = 0; row < found.size(); ++row) {
        hypotheses.push_back(data_.vocab.tgt.decode(found[row].front().tokens));
        const int64_t line = data_.valid->cache.line_number(batch.pairs[row]);
        references.push_back(valid_references_.at(static_cast<size_t>(line - 1)));
      }
    }
    at::Tensor sums = at::stack({loss.cpu(), nll.cpu(), at::scalar_tensor(double(tokens), at::kDouble)});
    all_reduce_cpu(sums);
    tokens = static_cast<int64_t>(sums[2].item<double>());
    Validation v;
    v.loss = sums[0].item<double>() / double(std::max<int64_t>(1, tokens));
    const double per_token_nll = sums[1].item<double>() / double(std::max<int64_t>(1, tokens));
    if (s_.train.valid_translate) score_translations(hypotheses, references, &v);
    switch (s_.train.best_metric) {
      case BestMetric::kLoss: v.selection = v.loss; break;
      case BestMetric::kBleu: v.selection = -*v.bleu; break;
      case BestMetric::kChrf: v.selection = -*v.chrf; break;
    }
    last_valid_loss_ = v.loss;
    v.best = !best_selection_ || v.selection < *best_selection_;
    if (v.best) {
      best_selection_ = v.selection;
      validations_without_improvement_ = 0;
    } else {
      ++validations_without_improvement_;
    }
    log::info("valid", "step {} | epoch {} | loss {:.4f} | nll {:.4f} | ppl {:.2f}{}{} | {:.1f} s",
              step_, epoch, v.loss, per_token_nll, std::exp(std::min(per_token_nll, 50.0)),
              v.bleu ? fmt::format(" | BLEU {:.2f} | chrF {:.2f}", *v.bleu, *v.chrf) : "",
              v.best ? " | best" : fmt::format(" | {} without improvement", validations_without_improvement_),
              seconds_since(start));
    std::vector<std::pair<std::string, std::string>> fields = {
        {"type", "\"valid\""},
        {"step", fmt::format("{}", step_)},
        {"epoch", fmt::format("{}", epoch)},
        {"loss", json_number(v.loss)},
        {"nll", json_number(per_token_nll)},
        {"ppl", json_number(std::exp(std::min(per_token_nll, 50.0)))},
        {"tokens", fmt::format("{}", tokens)}};
    if (v.bleu) {
      fields.emplace_back("bleu", json_number(*v.bleu));
      fields.emplace_back("chrf", json_number(*v.chrf));
    }
    fields.emplace_back("best", v.best ? "true" : "false");
    metrics_.write(fields);
    return v;
  }

  /// BLEU and chrF of all ranks' translations: sacreBLEU statistics summed over ranks.
  void score_translations(const std::vector<std::string>& hypotheses,
                          const std::vector<std::string>& references, Validation* v) {
    eval::BleuStats bleu = eval::bleu_stats(hypotheses, {references});
    eval::ChrfStats chrf = eval::chrf_stats(hypotheses, {references});
    std::vector<double> packed = {double(bleu.sys_len), double(bleu.ref_len)};
    for (int n = 0; n < 4; ++n) packed.push_back(double(bleu.counts[n]));
    for (int n = 0; n < 4; ++n) packed.push_back(double(bleu.totals[n]));
    for (int64_t x : chrf.stats) packed.push_back(double(x));
    at::Tensor t = at::tensor(packed, at::kDouble);
    all_reduce_cpu(t);
    const auto sum = t.accessor<double, 1>();
    bleu.sys_len = static_cast<int64_t>(sum[0]);
    bleu.ref_len = static_cast<int64_t>(sum[1]);
    for (int n = 0; n < 4; ++n) bleu.counts[n] = static_cast<int64_t>(sum[2 + n]);
    for (int n = 0; n < 4; ++n) bleu.totals[n] = static_cast<int64_t>(sum[6 + n]);
    for (size_t i = 0; i < chrf.stats.size(); ++i) chrf.stats[i] = static_cast<int64_t>(sum[10 + i]);
    v->bleu = eval::compute_bleu(bleu).score;
    v->chrf = eval::compute_chrf(chrf).score;
  }

  /// "rng.cpu.<r>" (and "rng.cuda.<r>") states of every rank r.
  std::vector<std::pair<std::string, at::Tensor>> gather_rng_states() {
    std::vector<std::pair<std::string, at::Tensor>> mine;
    {
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      mine.emplace_back("cpu", gen.get_state());
    }
#ifdef NMT_WITH_CUDA
    if (s_.device.is_cuda()) {
      auto gen = at::cuda::detail::getDefaultCUDAGenerator(s_.device.index());
      std::lock_guard<std::mutex> lock(gen.mutex());
      mine.emplace_back("cuda", gen.get_state());
    }
#endif
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& [kind, state] : mine) {
      const std::string bytes(static_cast<const char*>(state.data_ptr()), state.numel());
      const std::vector<std::string> all =
          comm() ? comm()->all_gather_strings(bytes) : std::vector<std::string>{bytes};
      for (size_t r = 0; r < all.size(); ++r) {
        at::Tensor t = at::empty({static_cast<int64_t>(all[r].size())}, at::kByte);
        std::memcpy(t.data_ptr(), all[r].data(), all[r].size());
        out.emplace_back(fmt::format("rng.{}.{}", kind, r), t);
      }
    }
    return out;
  }

  std::string vocab_fingerprint() const {
    return data_.vocab.joint
               ? data_.vocab.src.fingerprint()
               : data_.vocab.src.fingerprint() + "+" + data_.vocab.tgt.fingerprint();
  }

  const char* metric_name() const {
    switch (s_.train.best_metric) {
      case BestMetric::kBleu: return "BLEU";
      case BestMetric::kChrf: return "chrF";
      case BestMetric::kLoss: break;
    }
    return "validation loss";
  }

  void save(int64_t epoch, const std::optional<Validation>& validation, Clock::time_point start) {
    const auto t0 = Clock::now();
    // Each rank's random streams, gathered so one file restores every rank. Gathering is the
    // only part every rank takes; rank 0 alone copies the state and writes the file.
    auto rng_states = gather_rng_states();
    if (s_.rank != 0) return;
    checkpoint::CheckpointData out;
    for (const auto& item : model_->named_parameters())
      out.tensors.emplace_back("model." + item.key(), item.value().detach());
    for (auto& entry : optimizer_->state()) out.tensors.push_back(std::move(entry));
    for (auto& entry : scaler_->state()) out.tensors.push_back(std::move(entry));
    for (auto& [name, state] : rng_states) out.tensors.emplace_back(name, state);
    out.tensors.emplace_back("vocab.src_model", file_bytes(data_.vocab.src.model_path()));
    if (!data_.vocab.joint)
      out.tensors.emplace_back("vocab.tgt_model", file_bytes(data_.vocab.tgt.model_path()));
    out.metadata = {
        {kStepKey, std::to_string(step_)},
        {"epoch", std::to_string(epoch)},
        {"iterator_epoch", std::to_string(iterator_.epoch)},
        {"iterator_step", std::to_string(iterator_.step)},
        {"world_size", std::to_string(s_.world_size)},
        {"config", s_.config_yaml},
        {"config_hash", s_.config_hash},
        {"vocab_fingerprint", vocab_fingerprint()},
        {"vocab_joint", data_.vocab.joint ? "true" : "false"},
        {"elapsed_s", fmt::format("{}", elapsed_before_ + seconds_since(start))},
    };
    if (validation) {
      out.metadata["valid_loss"] = fmt::format("{}", validation->loss);
      out.metadata[std::string(checkpoint::kSelectionKey)] = fmt::format("{}", validation->selection);
      if (validation->bleu) out.metadata["valid_bleu"] = fmt::format("{}", *validation->bleu);
      if (validation->chrf) out.metadata["valid_chrf"] = fmt::format("{}", *validation->chrf);
    }
    if (best_selection_) out.metadata["best_selection"] = fmt::format("{}", *best_selection_);
    out.metadata["validations_without_improvement"] = std::to_string(validations_without_improvement_);
    last_checkpoint_ = checkpoints_.save(step_, out);
    log::info("checkpoint", "saved {} ({:.1f} MiB in {:.2f} s)", last_checkpoint_.string(),
              double(std::filesystem::file_size(last_checkpoint_)) / (1 << 20), seconds_since(t0));
  }

  static std::string json_number(double v) {
    return std::isfinite(v) ? fmt::format("{}", v) : std::string("null");
  }

  TrainerSetup s_;
  const data::PreparedData& data_;
  checkpoint::CheckpointDir checkpoints_;
  MetricsLog metrics_;
  model::Transformer model_{nullptr};
  std::vector<at::Tensor> params_;
  std::unique_ptr<AdamOptimizer> optimizer_;
  std::unique_ptr<amp::DynamicLossScaler> scaler_;
  std::unique_ptr<dist::GradientReducer> reducer_;
  std::shared_ptr<const data::BatchPlanner> planner_;
  int64_t update_freq_ = 1;
  size_t steps_per_epoch_ = 0;
  int64_t step_ = 0;
  int64_t first_step_ = 0;
  data::IteratorState iterator_;
  double elapsed_before_ = 0;
  at::Tensor last_grad_norm_;
  std::optional<double> best_selection_;
  int64_t validations_without_improvement_ = 0;
  std::optional<double> last_valid_loss_;
  std::vector<std::string> valid_references_;  ///< validation target lines, for BLEU
  int64_t skipped_logged_ = 0;
  bool sync_phases_ = false;
  double loss_normalizer_ = 1.0;  ///< fp16: the summed loss is divided by it before scaling  ///< benchmark mode: wait for the device after each phase
  std::filesystem::path last_checkpoint_;

  friend class Trainer;
};

Trainer::Trainer(TrainerSetup setup, const data::PreparedData& data)
    : impl_(std::make_unique<TrainerImpl>(std::move(setup), data)) {}
Trainer::~Trainer() = default;

void Trainer::restore(const checkpoint::CheckpointData& saved, const std::filesystem::path& file) {
  impl_->restore(saved, file);
  impl_->first_step_ = impl_->step_;
}

TrainSummary Trainer::run() { return impl_->run(); }

MaxTokensFit Trainer::fit_max_tokens(int64_t ranks_per_device) {
  return impl_->fit_max_tokens(ranks_per_device);
}

BenchmarkResult Trainer::benchmark(const BenchmarkOptions& options) {
  return impl_->benchmark(options);
}

std::optional<std::pair<std::filesystem::path, checkpoint::CheckpointData>> find_resume_checkpoint(
    const std::filesystem::path& run_dir, const checkpoint::CheckpointOptions& options,
    const ResumeFrom& from, const checkpoint::CheckpointFilter& reject) {
  switch (from.mode) {
    case ResumeFrom::Mode::kNone:
      return std::nullopt;
    case ResumeFrom::Mode::kPath:
      return std::make_pair(from.path, checkpoint::load_checkpoint(from.path));
    case ResumeFrom::Mode::kAuto:
      return checkpoint::CheckpointDir(run_dir / "checkpoints", options).load_newest_valid(reject);
  }
  return std::nullopt;
}

}  // namespace nmt::train
