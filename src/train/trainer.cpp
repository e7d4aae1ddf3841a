#include "train/trainer.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "amp/loss_scaler.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_tools.h"
#include "checkpoint/run_metadata.h"
#include "checkpoint/tensor_groups.h"
#include "data/batch_tensors.h"
#include "data/lang_tags.h"
#include "data/prepare.h"
#include "dist/device.h"
#include "dist/key_value_store.h"
#include "dist/process_group.h"
#include "dist/sum_over_ranks.h"
#include "model/transformer.h"
#include "train/ema.h"
#include "train/metrics_log.h"
#include "train/progress.h"
#include "train/stop_signal.h"
#include "train/training_state.h"
#include "train/updater.h"
#include "train/validator.h"
#include "util/log.h"
#include "util/phase_record.h"
#include "util/timer.h"

namespace nmt::train {
namespace {

/// Says how many steps the plan that the run starts in has, and where in it the run starts:
/// at a step of a whole epoch's plan, or at the rest of an epoch after updates under another
/// global batch.
void log_first_plan(int64_t steps, const data::IteratorState& at) {
  if (at.consumed.empty())
    log::info("train", "{} steps in epoch {}{}", steps, at.epoch,
              at.step > 0 ? fmt::format(", continuing at its step {}", at.step) : "");
  else
    log::info("train",
              "{} steps left in epoch {} after its updates under another global batch ({}), "
              "continuing at step {} of them",
              steps, at.epoch, data::format_consumed(at.consumed), at.step);
}

/// phases.jsonl's record of this rank's first update, with the host memory it holds from then
/// on while training.
void record_first_update(const std::filesystem::path& run_dir, int64_t rank, int64_t step,
                         Clock::time_point start) {
  const dist::HostMemory memory = dist::host_memory_now();
  record_phase(run_dir, "first update", seconds_since(start),
               {{"rank", rank},
                {"step", step},
                {"host_private_mb", double(memory.private_bytes) / (1 << 20)},
                {"host_shared_mb", double(memory.shared_bytes) / (1 << 20)}});
}

}  // namespace

Trainer::Trainer(RunSetup setup, const data::PreparedData& data)
    : setup_(std::move(setup)),
      data_(data),
      updater_(std::make_unique<Updater>(updater_setup(setup_, data.vocab))),
      checkpoints_(std::make_unique<checkpoint::CheckpointDir>(setup_.run_dir / "checkpoints",
                                                               setup_.checkpoint)),
      planner_(train_planner(setup_, data)) {
  if (!data.valid.empty()) validator_ = std::make_unique<Validator>(setup_, data);
  // The steps per epoch are said by run(), from the plan its batches start in: planning
  // epoch 1 here as well took as long again (a minute for tens of millions of pairs).
  log::info("train", "model: {} parameters, update_freq {}", updater_->model()->parameter_count(),
            updater_->setup().update_freq);
}

Trainer::~Trainer() = default;

void Trainer::restore(const checkpoint::CheckpointData& saved, const std::filesystem::path& file) {
  const checkpoint::RunMetadata meta = restore_checkpoint(saved, file, *updater_, data_.vocab);
  check_languages(meta, data::run_languages(setup_.data), file.string(), "resuming");
  step_ = first_step_ = meta.step;
  iterator_ = continue_data_position(meta, file);
  elapsed_before_ = meta.elapsed_s;
  // Early-stopping state continues across the resume.
  if (validator_) validator_->restore({meta.best_selection, meta.validations_without_improvement});
  resumed_from_ = file;
  log::info("train", "resumed from {} at step {} (epoch {}, step {} of the epoch)", file.string(),
            step_, iterator_.epoch, iterator_.step);
}

void Trainer::initialize_from(const checkpoint::CheckpointData& saved,
                              const std::filesystem::path& file) {
  // A model of ours has tags for the languages it was trained on, and learns no new one here.
  // An imported vocabulary has codes for all its languages (NLLB's 200): fine-tuning on any of
  // them is its purpose, and a language without a code was refused when the data was encoded.
  if (data_.vocab.src.hf_table() == nullptr)
    check_languages(checkpoint::RunMetadata::parse(saved.metadata, file.string()),
                    data::run_languages(setup_.data), file.string(), "fine-tuning");
  load_initial_parameters(saved, file, *updater_, data_.vocab);
  log::info("train", "initialized the model from {}", file.string());
}

data::IteratorState Trainer::continue_data_position(const checkpoint::RunMetadata& meta,
                                                    const std::filesystem::path& file) const {
  data::IteratorState saved{meta.iterator_epoch, meta.iterator_step,
                            data::parse_consumed(meta.iterator_consumed)};
  const int64_t freq = updater_->setup().update_freq;
  // Files from before update_freq was recorded resume only on the same ranks (checked by
  // restore_checkpoint), with the update_freq they had.
  const int64_t saved_freq = meta.update_freq > 0 ? meta.update_freq : freq;
  if (meta.world_size == setup_.world_size && saved_freq == freq) return saved;
  const int64_t saved_batch = meta.world_size * saved_freq, batch = setup_.world_size * freq;
  if (saved_batch == batch) {
    log::info("train",
              "{}: saved by {} rank(s) x update_freq {}, resumed as {} x {}: the same {} "
              "batches per update, so the same updates continue",
              file.string(), meta.world_size, saved_freq, setup_.world_size, freq, batch);
  } else {
    log::info("train",
              "{}: saved by {} rank(s) x update_freq {}, resumed as {} x {}: the global "
              "batch changes from {} to {} batches per update; the rest of epoch {} is planned "
              "from the pairs it has not trained on, and the update count and schedule continue",
              file.string(), meta.world_size, saved_freq, setup_.world_size, freq, saved_batch,
              batch, saved.epoch);
  }
  return data::continue_position(saved, meta.world_size, saved_freq, setup_.world_size, freq);
}

RunSummary Trainer::run() {
  // Before Progress opens metrics.jsonl: a replaced run's later records go with its
  // checkpoints rather than being dropped. Not by a run with nothing to do, which changes
  // nothing (a limit already reached is known without the stop agreement's collective).
  if (setup_.rank == 0 && !already_done(limit_reached())) set_aside_later_checkpoints();
  Progress progress(setup_.train, setup_.rank, setup_.run_dir / kMetricsFileName, step_,
                    elapsed_before_);
  int64_t epoch = iterator_.epoch;        // of the last update
  std::optional<double> last_train_loss;  // of the last logged interval
  std::optional<StopReason> stop = should_stop(progress);
  // A finished run started again changes nothing: no update, validation or checkpoint.
  if (const std::optional<std::string> done = already_done(stop)) {
    log::warn("train", "{}: nothing to do", *done);
    return finish(StopReason::kAlreadyDone, epoch, last_train_loss);
  }
  const auto plan_start = Clock::now();
  data::BatchPrefetcher batches(data_.train, planner_, setup_.rank, iterator_,
                                batch_ids(setup_.model, data_.vocab), setup_.data.prefetch,
                                /*pin_memory=*/setup_.device.is_cuda());
  log_first_plan(batches.first_plan_steps(), iterator_);
  // The plan phase of every rank (one of a node made the plan, the others mapped it:
  // plans_made) and its memory after the first update, what it holds while training, go to
  // phases.jsonl per rank (util/phase_record.h).
  record_phase(setup_.run_dir, "plan", seconds_since(plan_start),
               {{"rank", setup_.rank},
                {"steps", batches.first_plan_steps()},
                {"plans_made", planner_->plans_made()}});
  const BatchSource next_batch = [&batches] { return batches.next(); };
  IntervalStats interval = IntervalStats::zero(setup_.device);
  int64_t last_saved = -1, last_validated = -1;
  for (; !stop; stop = should_stop(progress)) {
    const bool log_step = (step_ + 1) % setup_.train.log_every == 0;
    const auto update_start = Clock::now();
    const UpdatePosition at = updater_->update(step_ + 1, next_batch, interval, log_step);
    ++step_;
    if (step_ == first_step_ + 1)
      record_first_update(setup_.run_dir, setup_.rank, step_, update_start);
    iterator_ = at.next;
    epoch = at.epoch;
    progress.tick(step_);
    if (log_step) {
      last_train_loss = log_interval(progress, interval, epoch);
      interval = IntervalStats::zero(setup_.device);
    }
    const auto pause = Clock::now();  // validation and checkpoints are not training time
    std::optional<ValidationResult> validation;
    if (validator_ && setup_.train.valid_every > 0 && step_ % setup_.train.valid_every == 0) {
      validation = validate(progress, epoch);
      last_validated = step_;
    }
    if (step_ % setup_.checkpoint.every_steps == 0 || validation) {
      save(epoch, validation, progress);
      last_saved = step_;
    }
    interval.start += Clock::now() - pause;
    if (validator_ && validator_->patience_exhausted()) {
      log::info("train", "early stop: {} validations without improvement of {}",
                validator_->record().without_improvement, validator_->metric_name());
      stop = StopReason::kEarlyStop;
      break;
    }
  }
  progress.clear();
  if (interval.updates > 0) last_train_loss = log_interval(progress, interval, epoch);
  std::optional<ValidationResult> validation;
  if (validator_ && setup_.train.valid_every > 0 && last_validated != step_ && step_ > 0)
    validation = validate(progress, epoch);
  if (last_saved != step_ && step_ > 0) save(epoch, validation, progress);
  RunSummary summary = finish(*stop, epoch, last_train_loss);
  if (summary.stop_reason == StopReason::kSignal)
    log::info("train", "stopped by signal at step {}; checkpoint {}", step_,
              last_checkpoint_.string());
  return summary;
}

std::optional<std::string> Trainer::already_done(std::optional<StopReason> stop) const {
  const TrainOptions& t = setup_.train;
  if (stop == StopReason::kMaxSteps)
    return fmt::format("already at step {} of train.max_steps {}", step_, t.max_steps);
  if (stop == StopReason::kMaxEpochs)
    return fmt::format("already past the last epoch of train.max_epochs {} (step {})", t.max_epochs,
                       step_);
  if (validator_ && validator_->patience_exhausted())
    return fmt::format(
        "stopped early already: {} validations without improvement of {} "
        "(train.patience {})",
        validator_->record().without_improvement, validator_->metric_name(), t.patience);
  return std::nullopt;
}

void Trainer::set_aside_later_checkpoints() const {
  // Checkpoints of later steps are those of a run this one replaces (resumed from an earlier
  // checkpoint, or --resume none): see CheckpointDir::set_aside_after.
  if (const auto folder = checkpoints_->set_aside_after(step_))
    set_aside_records_after(setup_.run_dir, step_, *folder);
}

std::optional<StopReason> Trainer::limit_reached() const {
  const TrainOptions& t = setup_.train;
  if (t.max_steps > 0 && step_ >= t.max_steps) return StopReason::kMaxSteps;
  if (t.max_epochs > 0 && iterator_.epoch > t.max_epochs) return StopReason::kMaxEpochs;
  return std::nullopt;
}

std::optional<StopReason> Trainer::should_stop(const Progress& progress) {
  const TrainOptions& t = setup_.train;
  if (const std::optional<StopReason> limit = limit_reached()) return limit;
  bool out_of_time = t.max_minutes > 0 && progress.run_seconds() >= 60.0 * t.max_minutes;
  if (!setup_.communicator) {
    if (stop_requested()) return StopReason::kSignal;
  } else {
    // A signal on any rank stops every rank after the same update, the next one, whatever
    // log_every is: one store round trip per update (stop_signal.h).
    const std::optional<int64_t> stop_after =
        agreed_stop(*setup_.communicator->store(), step_, stop_requested());
    if (stop_after && step_ >= *stop_after) return StopReason::kSignal;
    // The time limit is not urgent: the ranks agree on it at log steps (one all-reduce).
    if (step_ % t.log_every != 0) return std::nullopt;
    double ranks_out_of_time = out_of_time ? 1.0 : 0.0;
    dist::sum_over_ranks(setup_.communicator.get(), {ranks_out_of_time});
    out_of_time = ranks_out_of_time > 0;
  }
  if (out_of_time) {
    log::info("train", "train.max_minutes ({}) reached", t.max_minutes);
    return StopReason::kMaxMinutes;
  }
  return std::nullopt;
}

double Trainer::log_interval(Progress& progress, IntervalStats& interval, int64_t epoch) {
  amp::DynamicLossScaler& scaler = updater_->scaler();
  scaler.check(step_);  // the one host-device synchronization of the interval
  // Loss and token counts over all ranks (one small all-reduce per log step).
  IntervalTotals t;
  t.loss_sum = interval.loss_sum.item<double>();
  t.nll_sum = interval.nll_sum.item<double>();
  t.tgt_tokens = double(interval.tgt_tokens);
  t.src_tokens = double(interval.src_tokens);
  t.padded_tokens = double(interval.padded_tokens);
  dist::sum_over_ranks(setup_.communicator.get(),
                       {t.loss_sum, t.nll_sum, t.tgt_tokens, t.src_tokens, t.padded_tokens});
  t.seconds = seconds_since(interval.start);
  t.data_wait_s = interval.data_wait_s;
  t.forward_s = interval.forward_s;
  t.backward_s = interval.backward_s;
  t.sync_s = interval.sync_s;
  t.optimizer_s = interval.optimizer_s;
  t.split_measured = !setup_.device.is_cuda();
  t.oom_skipped_updates = updater_->oom_skipped_updates();
  run_tokens_ += interval.src_tokens + interval.tgt_tokens;
  train_seconds_ += t.seconds;
  const at::Tensor& norm = updater_->last_grad_norm();
  return progress.interval(step_, epoch, t, scaler.stats(),
                           norm.defined() ? norm.item<double>() : 0.0, updater_->peak_memory_mb());
}

ValidationResult Trainer::validate(Progress& progress, int64_t epoch) {
  const auto start = Clock::now();
  progress.clear();
  // With train.ema_decay the averaged weights are what is validated (and what nmt-translate
  // uses), so they rank the checkpoints and drive early stopping.
  std::optional<ParameterAverage::Swap> averaged;
  if (ParameterAverage* average = updater_->average()) averaged.emplace(*average);
  const ValidationResult v = validator_->validate(updater_->model());
  averaged.reset();
  last_valid_loss_ = v.first.loss;
  progress.validation(step_, epoch, v);
  validation_seconds_ += seconds_since(start);
  return v;
}

void Trainer::save(int64_t epoch, const std::optional<ValidationResult>& validation,
                   const Progress& progress) {
  const auto start = Clock::now();
  // Gathering the random streams (and a sharded optimizer's state) is the only part every
  // rank takes; rank 0 writes the file.
  GatheredState gathered = gather_state(*updater_);
  if (setup_.rank != 0) return;
  struct AddTime {  // every return below counts
    double& total;
    Clock::time_point start;
    ~AddTime() { total += seconds_since(start); }
  } add_time{checkpoint_seconds_, start};
  checkpoint::RunMetadata meta;
  meta.step = step_;
  meta.epoch = epoch;
  meta.iterator_epoch = iterator_.epoch;
  meta.iterator_step = iterator_.step;
  meta.world_size = setup_.world_size;
  meta.update_freq = updater_->setup().update_freq;
  meta.iterator_consumed = data::format_consumed(iterator_.consumed);
  meta.config = setup_.config_yaml;
  meta.config_hash = setup_.config_hash;
  meta.vocab_fingerprint = vocab_fingerprint(data_.vocab);
  meta.vocab_joint = data_.vocab.joint;
  meta.languages = data::run_languages(setup_.data);
  meta.target_lang_tags = setup_.data.lang_tags == data::LangTags::kTarget;
  meta.elapsed_s = progress.elapsed();
  if (validation) {
    meta.valid_loss = validation->first.loss;
    meta.valid_bleu = validation->first.bleu;
    meta.valid_chrf = validation->first.chrf;
    meta.selection = validation->selection;
  }
  if (validator_) {
    meta.best_selection = validator_->record().best_selection;
    meta.validations_without_improvement = validator_->record().without_improvement;
  }
  last_checkpoint_ = checkpoints_->save(
      step_, make_checkpoint(*updater_, std::move(gathered), data_.vocab, meta));
  log::info("checkpoint", "saved {} ({:.1f} MiB in {:.2f} s)", last_checkpoint_.string(),
            double(std::filesystem::file_size(last_checkpoint_)) / (1 << 20), seconds_since(start));
}

RunSummary Trainer::finish(StopReason stop_reason, int64_t epoch,
                           std::optional<double> last_train_loss) {
  RunSummary summary;
  // Every rank hashes its parameters: equal hashes show the replicas stayed identical.
  checkpoint::CheckpointData params;
  for (const auto& item : updater_->model()->named_parameters())
    checkpoint::add_tensor(params, checkpoint::TensorGroup::kModel, item.key(),
                           item.value().detach().cpu());
  const std::string hash = fmt::format("{:016x}", checkpoint::model_parameter_hash(params));
  const double peak_mb = updater_->peak_memory_mb();
  log::info("train", "parameter hash {} at step {}; peak memory {:.0f} MiB", hash, step_, peak_mb);
  // Per-rank figures and the run's tokens, in one small all-reduce.
  const int64_t world = setup_.world_size;
  std::vector<double> peaks = dist::own_slot(setup_.rank, world, peak_mb);
  double tokens = double(run_tokens_);
  std::vector<dist::SummedField> fields;
  dist::append_fields(fields, peaks);
  fields.emplace_back(tokens);
  dist::sum_over_ranks(setup_.communicator.get(), fields);
  summary.parameter_hashes =
      setup_.communicator ? setup_.communicator->all_gather_strings(hash) : std::vector{hash};
  summary.peak_memory_mb = peaks;
  summary.tokens = static_cast<int64_t>(tokens);
  summary.tokens_per_s = train_seconds_ > 0 ? tokens / train_seconds_ : 0.0;
  summary.train_s = train_seconds_;
  summary.validation_s = validation_seconds_;
  summary.checkpoint_s = checkpoint_seconds_;
  summary.final_step = step_;
  summary.oom_skipped_updates = updater_->oom_skipped_updates();
  summary.last_valid_loss = last_valid_loss_;
  summary.last_checkpoint = last_checkpoint_.string();
  if (resumed_from_) {
    summary.resumed_from = resumed_from_->string();
    summary.resumed_step = first_step_;
  }
  summary.stop_reason = stop_reason;
  summary.epoch = epoch;
  summary.last_train_loss = last_train_loss;
  return summary;
}

}  // namespace nmt::train
