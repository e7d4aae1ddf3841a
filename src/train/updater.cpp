#include "train/updater.h"

#include <algorithm>
#include <utility>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "amp/autocast.h"
#include "amp/loss_scaler.h"
#include "dist/device.h"
#include "dist/gradient_reducer.h"
#include "dist/process_group.h"
#include "dist/progress_marks.h"
#include "dist/sum_over_ranks.h"
#include "model/flops.h"
#include "model/transformer.h"
#include "train/ema.h"
#include "train/grad_utils.h"
#include "train/loss.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"
#include "train/sharded_optimizer.h"
#include "util/error.h"
#include "util/log.h"
#include "util/timer.h"

namespace nmt::train {
IntervalStats IntervalStats::zero(c10::Device device) {
  IntervalStats i;
  i.loss_sum = at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(device));
  i.nll_sum = at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(device));
  return i;
}

void IntervalStats::add_counts(const IntervalStats& o) {
  tgt_tokens += o.tgt_tokens;
  src_tokens += o.src_tokens;
  padded_tokens += o.padded_tokens;
  updates += o.updates;
  oom_skips += o.oom_skips;
  data_wait_s += o.data_wait_s;
  forward_s += o.forward_s;
  backward_s += o.backward_s;
  sync_s += o.sync_s;
  optimizer_s += o.optimizer_s;
  flops += o.flops;
  kernel_flops += o.kernel_flops;
}

struct Updater::State {
  UpdaterSetup setup;
  model::Transformer model{nullptr};
  std::vector<at::Tensor> params;
  std::unique_ptr<ParameterOptimizer> optimizer;
  std::unique_ptr<ParameterAverage> average;  ///< null without train.ema_decay
  std::unique_ptr<amp::DynamicLossScaler> scaler;
  std::unique_ptr<dist::GradientReducer> reducer;
  /// fp16: the token-summed loss is divided by it before scaling (see the constructor).
  double loss_normalizer = 1.0;
  bool sync_phases = false;
  at::Tensor last_grad_norm;
  std::unique_ptr<OomSkips> oom_skips;
  /// NMT_FAULT_OOM's backward faults: a hook on a parameter in the middle of backward order
  /// (the first encoder parameter: the decoder's gradients, and their buckets, come first)
  /// throws while armed with the step it fails (0: disarmed).
  std::shared_ptr<int64_t> fault_armed = std::make_shared<int64_t>(0);

  dist::Communicator* comm() const { return setup.communicator.get(); }

  /// Clears the gradients: zeroed in place where they live in the all-reduce's buckets (one
  /// copy of them, not two), else set to none.
  void zero_grad() {
    if (reducer) reducer->zero_grad();
    else optimizer->zero_grad();
  }

  /// The loss of a batch on the device, under autocast.
  LossSums forward(const at::Tensor& src, const at::Tensor& tgt_in, const at::Tensor& tgt_out) {
    amp::AutocastScope autocast(setup.precision, setup.device.type());
    const at::Tensor logits = model->forward(src, tgt_in);
    return label_smoothed_cross_entropy(logits, tgt_out, setup.train.label_smoothing,
                                        setup.pad_id);
  }

  /// Adds the gradients of a batch's loss, scaled for fp16.
  void backward(const LossSums& sums) {
    scaler->scale(loss_normalizer == 1.0 ? sums.loss : sums.loss / loss_normalizer).backward();
  }

  /// An injected fault of this rank in update `step` and `phase`, if any.
  bool fault_at(int64_t step, FaultPhase phase) const {
    for (const OomFault& f : setup.oom_faults)
      if (f.rank == setup.rank && f.step == step && f.phase == phase) return true;
    return false;
  }

  /// Forward and backward of one batch; an allocation failure is caught and described ("" when
  /// none), so that this rank still joins the gradient all-reduce that the others run.
  std::string forward_backward_or_oom(int64_t step, bool last, const data::BatchTensors& batch,
                                      IntervalStats& interval);

  /// Every rank's failed batch ("" for none), in rank order: one small all-reduce, and the
  /// descriptions gathered only when somebody failed.
  std::vector<std::string> agree_on_failures(const std::string& mine) {
    if (!comm()) return {mine};
    std::vector<double> failed = dist::own_slot(setup.rank, setup.world_size, mine.empty() ? 0 : 1);
    std::vector<dist::SummedField> fields;
    dist::append_fields(fields, failed);
    dist::sum_over_ranks(comm(), fields);
    for (double f : failed)
      if (f > 0) return comm()->all_gather_strings(mine);
    return std::vector<std::string>(static_cast<size_t>(setup.world_size));
  }

  /// Refuses to train together unless every rank has the same identity and parameter count.
  void check_ranks_agree() {
    const std::string mine =
        fmt::format("{} | {} parameters", setup.identity, model->parameter_count());
    const std::vector<std::string> all = comm()->all_gather_strings(mine);
    for (size_t r = 1; r < all.size(); ++r) {
      NMT_CHECK(all[r] == all[0], DistError,
                "ranks disagree: rank 0 has {}, rank {} has {}; every rank must run the same "
                "config (compare with --print-config) and data",
                all[0], r, all[r]);
    }
  }
};

std::string Updater::State::forward_backward_or_oom(int64_t step, bool last,
                                                     const data::BatchTensors& batch,
                                                     IntervalStats& interval) {
  const UpdaterSetup& u = setup;
  const auto sync = [&] {
    if (sync_phases && u.device.is_cuda()) dist::synchronize_cuda(u.device.index());
  };
  FaultPhase phase = FaultPhase::kForward;
  try {
    if (fault_at(step, FaultPhase::kForward)) throw_injected_oom(u.rank, step, phase);
    const bool non_blocking = u.device.is_cuda();
    const at::Tensor src = batch.src.to(u.device, non_blocking);
    const at::Tensor tgt_in = batch.tgt_in.to(u.device, non_blocking);
    const at::Tensor tgt_out = batch.tgt_out.to(u.device, non_blocking);
    interval.flops +=
        model::real_training_flops(u.model, u.tgt_vocab_size, batch.src_lengths, batch.tgt_lengths);
    interval.kernel_flops += model::training_flops(u.model, u.tgt_vocab_size, src.size(0),
                                                   src.size(1), tgt_out.size(1),
                                                   model::AttentionCount::kKernel);
    sync();
    const auto t0 = Clock::now();
    const LossSums sums = forward(src, tgt_in, tgt_out);
    sync();
    const auto t1 = Clock::now();
    phase = FaultPhase::kBackward;
    *fault_armed = last && fault_at(step, FaultPhase::kBackward) ? step : 0;
    backward(sums);
    *fault_armed = 0;
    sync();
    interval.forward_s += std::chrono::duration<double>(t1 - t0).count();
    interval.backward_s += seconds_since(t1);
    interval.loss_sum.add_(sums.loss.detach());
    interval.nll_sum.add_(sums.nll);
    return "";
  } catch (const DistError&) {
    throw;  // a collective that failed (even for memory) is not a batch to skip
  } catch (const std::exception& e) {
    *fault_armed = 0;
    if (!dist::is_out_of_memory(e)) throw;
    const std::string described = fmt::format(
        "{} of a batch of {} sentences x {} source / {} target tokens (padded)",
        phase == FaultPhase::kForward ? "forward" : "backward", batch.src.size(0),
        batch.src.size(1), batch.tgt_out.size(1));
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    const std::string reason = c10_error ? c10_error->what_without_backtrace() : e.what();
    log::warn("train", "step {}: out of memory in {}: {}", step, described,
              reason.substr(0, reason.find('\n')));
    if (u.device.is_cuda()) dist::release_cached_cuda_memory();
    return described;
  }
}

Updater::Updater(UpdaterSetup setup) : s_(std::make_unique<State>()) {
  s_->setup = std::move(setup);
  const UpdaterSetup& u = s_->setup;
  // Same initial parameters on every rank; dropout streams differ per rank.
  at::manual_seed(static_cast<uint64_t>(u.train.seed));
  s_->model = model::Transformer(u.model, u.src_vocab_size, u.tgt_vocab_size, u.pad_id);
  s_->model->to(u.device);
  s_->model->set_activation_checkpointing(u.train.activation_checkpointing);
  s_->model->set_quantization(u.train.quantize);
  at::manual_seed(static_cast<uint64_t>(u.train.seed) * 1000003u + static_cast<uint64_t>(u.rank) + 1);
  NamedTensors named, trained;
  for (const auto& item : s_->model->named_parameters()) named.emplace_back(item.key(), item.value());
  // A frozen parameter (model.freeze_output_bias) is averaged and saved, never stepped: AdamW's
  // weight decay would move it even with a zero gradient.
  int64_t trained_elements = 0;
  for (const auto& entry : named) {
    if (!entry.second.requires_grad()) continue;
    trained.push_back(entry);
    trained_elements += entry.second.numel();
  }
  const bool sharded = u.dist.sharding == dist::Sharding::kOptimizer && s_->comm() &&
                       s_->comm()->world_size() > 1;
  if (sharded)
    s_->optimizer = std::make_unique<ShardedOptimizer>(trained, u.train, u.communicator);
  else
    s_->optimizer = make_optimizer(trained, u.train);
  for (const auto& [name, tensor] : named) s_->params.push_back(tensor);
  s_->scaler = std::make_unique<amp::DynamicLossScaler>(u.amp, u.device,
                                                         u.precision == amp::AmpMode::kFp16);
  // The loss is a sum over tokens, so its weight gradients are about as many times larger
  // than a mean loss's as an update has target tokens. Under fp16 loss scaling that would
  // overflow half precision until the scale had fallen by that factor, skipping the first
  // ~log2(tokens) updates; so the summed loss is divided by a fixed bound of the update's
  // target tokens before scaling, and unscaling multiplies it back. Exact up to rounding;
  // without fp16 the loss is left as it is.
  if (s_->scaler->enabled())
    s_->loss_normalizer = double(u.max_tokens) * double(u.world_size) * double(u.update_freq);
  if (s_->comm()) {
    s_->check_ranks_agree();
    at::NoGradGuard no_grad;
    s_->comm()->broadcast(s_->params, 0);  // every rank starts from rank 0's parameters
  }
  if (u.train.ema_decay > 0) s_->average = std::make_unique<ParameterAverage>(named, u.train.ema_decay);
  s_->oom_skips = std::make_unique<OomSkips>(u.train.max_oom_skips);
  for (const OomFault& fault : u.oom_faults) {
    if (fault.phase != FaultPhase::kBackward || fault.rank != u.rank) continue;
    for (auto& [name, tensor] : named) {
      if (name.rfind("encoder_layers.", 0) != 0 || !tensor.requires_grad()) continue;
      tensor.register_hook([armed = s_->fault_armed, rank = u.rank](const at::Tensor& grad) {
        const int64_t step = std::exchange(*armed, 0);
        if (step == 0) return at::Tensor(grad);
        throw_injected_oom(rank, step, FaultPhase::kBackward);
      });
      break;
    }
    break;
  }
  if (!s_->comm()) return;
  s_->reducer = std::make_unique<dist::GradientReducer>(
      s_->params, u.communicator, dist::GradientReducerOptions{u.dist.bucket_mb, u.dist.overlap});
  log::info("train", "{} ranks ({}); gradients summed in {} bucket(s) of about {} MB{}",
            s_->comm()->world_size(), s_->comm()->backend_name(), s_->reducer->num_buckets(),
            u.dist.bucket_mb, u.dist.overlap ? ", overlapping backward" : ", after backward");
  if (const auto* shards = dynamic_cast<const ShardedOptimizer*>(s_->optimizer.get()))
    log::info("train", "optimizer state sharded (dist.sharding optimizer): rank {} keeps it for "
              "{} of {} trained elements",
              u.rank, shards->owned_elements(), trained_elements);
}

Updater::~Updater() = default;

UpdatePosition Updater::update(int64_t step, const BatchSource& next_batch,
                               IntervalStats& interval, bool want_grad_norm) {
  State& s = *s_;
  const UpdaterSetup& u = s.setup;
  s.model->train();
  s.zero_grad();
  int64_t update_tokens = 0;
  UpdatePosition position;
  std::string failed;  // this rank's batch that ran out of memory, described ("" if none)
  for (int64_t k = 0; k < u.update_freq; ++k) {
    const auto wait_start = Clock::now();
    data::BatchTensors batch = next_batch();
    interval.data_wait_s += seconds_since(wait_start);
    update_tokens += batch.global_tgt_tokens;
    position = {batch.epoch, batch.next};
    interval.tgt_tokens += batch.tgt_tokens;
    interval.src_tokens += batch.src_tokens;
    interval.padded_tokens += batch.src.numel() + batch.tgt_out.numel();
    if (s.reducer) s.reducer->set_sync(k + 1 == u.update_freq);
    // A rank without data this step, or that ran out of memory, still joins the update.
    if (batch.empty() || !failed.empty()) continue;
    failed = s.forward_backward_or_oom(step, k + 1 == u.update_freq, batch, interval);
  }
  // One mark per update, where a rank enters the gradient all-reduce: peers name a rank that
  // stalls before it (a failed collective reports who is behind), at one store write a step.
  if (s.comm()) s.comm()->progress().mark(fmt::format("step {}: backward done", step));
  auto t0 = Clock::now();
  if (s.reducer) {
    s.reducer->finalize();  // .grad is now the sum over all ranks
    sync_for_timing();
    interval.sync_s += seconds_since(t0);
    t0 = Clock::now();
  }
  if (s.oom_skips->record(step, s.agree_on_failures(failed))) {
    // Somebody's gradients are partial: nobody steps, and what the batches held goes.
    s.zero_grad();
    if (u.device.is_cuda()) dist::release_cached_cuda_memory();
    ++interval.oom_skips;
    ++interval.updates;
    return position;
  }
  std::vector<at::Tensor> grads;
  grads.reserve(s.params.size());
  for (at::Tensor& p : s.params) {
    if (!p.requires_grad()) continue;  // frozen: no gradient, no step
    // A parameter no batch reached (e.g. all ranks empty) gets a zero gradient.
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
    grads.push_back(p.grad());
  }
  // Loss is a sum over tokens: dividing by the update's global target-token count makes the
  // result independent of how tokens are split across ranks and accumulation steps.
  const at::Tensor divisor =
      at::full({}, static_cast<double>(std::max<int64_t>(1, update_tokens)) / s.loss_normalizer,
               at::TensorOptions().dtype(at::kFloat).device(u.device));
  s.scaler->unscale_(grads, divisor);
  // The norm is needed to clip, else only for the log line: skip the pass over every gradient
  // when neither wants it.
  if (u.train.clip_norm > 0 || want_grad_norm)
    s.last_grad_norm = clip_grad_norm_(grads, u.train.clip_norm);
  s.optimizer->step(learning_rate(u.train, step), &s.scaler->found_inf());
  s.scaler->update();
  if (s.average) s.average->update(step);
  sync_for_timing();
  interval.optimizer_s += seconds_since(t0);
  ++interval.updates;
  return position;
}

void Updater::forward_backward(const data::BatchTensors& batch) {
  const c10::Device device = s_->setup.device;
  s_->model->train();
  s_->backward(s_->forward(batch.src.to(device), batch.tgt_in.to(device), batch.tgt_out.to(device)));
}

void Updater::zero_grad() { s_->zero_grad(); }

void Updater::set_sync_phases(bool sync) { s_->sync_phases = sync; }

void Updater::set_gradient_sync(bool sync) {
  if (s_->reducer) s_->reducer->set_sync(sync);
}

model::Transformer& Updater::model() { return s_->model; }
ParameterOptimizer& Updater::optimizer() { return *s_->optimizer; }
ParameterAverage* Updater::average() { return s_->average.get(); }
amp::DynamicLossScaler& Updater::scaler() { return *s_->scaler; }
const UpdaterSetup& Updater::setup() const { return s_->setup; }
const at::Tensor& Updater::last_grad_norm() const { return s_->last_grad_norm; }
int64_t Updater::oom_skipped_updates() const { return s_->oom_skips->total(); }

double Updater::peak_memory_mb() const {
  const c10::Device device = s_->setup.device;
  return double(device.is_cuda() ? dist::peak_cuda_memory_bytes(device.index())
                                 : dist::peak_host_memory_bytes()) /
         (1 << 20);
}

void Updater::sync_for_timing() const {
  if (s_->sync_phases && s_->setup.device.is_cuda()) dist::synchronize_cuda(s_->setup.device.index());
}

}  // namespace nmt::train
