#include "train/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "amp/loss_scaler.h"
#include "dist/device.h"
#include "train/lr_schedule.h"
#include "util/duration.h"
#include "util/json_text.h"
#include "util/log.h"
#include "util/timer.h"

namespace nmt::train {
namespace {

double perplexity(double nll) { return std::exp(std::min(nll, 50.0)); }

}  // namespace

Progress::Progress(const TrainOptions& options, int64_t rank,
                   const std::filesystem::path& metrics_file, int64_t first_step,
                   double elapsed_before)
    : options_(options),
      live_(rank == 0 && ::isatty(STDERR_FILENO) && log::enabled(log::Level::kInfo)),
      metrics_(metrics_file, rank == 0, options.tensorboard, first_step),
      first_step_(first_step),
      elapsed_before_(elapsed_before) {}

double Progress::elapsed() const { return elapsed_before_ + seconds_since(start_); }
double Progress::run_seconds() const { return seconds_since(start_); }

double Progress::eta_seconds(int64_t step) const {
  const double done = double(step - first_step_);
  if (done <= 0) return NAN;
  const double per_step = seconds_since(start_) / done;
  double eta = options_.max_steps > 0 ? per_step * double(options_.max_steps - step) : NAN;
  if (options_.max_minutes > 0) {
    const double left = 60.0 * options_.max_minutes - seconds_since(start_);
    eta = std::isfinite(eta) ? std::min(eta, left) : left;
  }
  return eta;
}

void Progress::tick(int64_t step) {
  if (!live_) return;
  std::fprintf(stderr, "\r\033[K[train] step %lld%s | %s elapsed | ETA %s",
               static_cast<long long>(step),
               options_.max_steps > 0 ? fmt::format("/{}", options_.max_steps).c_str() : "",
               format_duration(elapsed()).c_str(), format_duration(eta_seconds(step)).c_str());
  std::fflush(stderr);
}

void Progress::clear() {
  if (!live_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
}

double Progress::interval(int64_t step, int64_t epoch, const IntervalTotals& t,
                          const amp::ScalerStats& scaler, double grad_norm, double peak_mb) {
  clear();
  const double tokens = std::max(1.0, t.tgt_tokens);
  const double loss = t.loss_sum / tokens;
  const double nll = t.nll_sum / tokens;
  const double seconds = std::max(1e-9, t.seconds);
  const double tokens_per_s = (t.tgt_tokens + t.src_tokens) / seconds;
  const double eta = eta_seconds(step);
  const double lr = learning_rate(options_, step);
  // The ranks of a host share the mapped token caches: the private part is what each adds.
  const dist::HostMemory host = dist::host_memory_now();
  log::info("train",
            "step {}{} | epoch {} | loss {:.4f} | nll {:.4f} | ppl {:.2f} | lr {:.3g} | {:.0f} "
            "tok/s | gnorm {:.3f} | scale {:g} | {} MiB (host {} private, {} shared) | {} "
            "elapsed, ETA {}",
            step, options_.max_steps > 0 ? fmt::format("/{}", options_.max_steps) : "", epoch,
            loss, nll, perplexity(nll), lr, tokens_per_s, grad_norm, scaler.scale,
            static_cast<int64_t>(peak_mb), host.private_bytes >> 20, host.shared_bytes >> 20,
            format_duration(elapsed()), format_duration(eta));
  if (scaler.skipped_total > skipped_logged_) {
    log::warn("train", "{} update(s) skipped for non-finite gradients so far (loss scale now {:g})",
              scaler.skipped_total, scaler.scale);
    skipped_logged_ = scaler.skipped_total;
  }
  nlohmann::ordered_json record;
  record["type"] = "train";
  record["step"] = step;
  record["epoch"] = epoch;
  record["loss"] = loss;
  record["nll"] = nll;
  record["ppl"] = perplexity(nll);
  record["lr"] = lr;
  record["tokens_per_s"] = tokens_per_s;
  record["padded_tokens_per_s"] = t.padded_tokens / seconds;
  record["grad_norm"] = grad_norm;
  record["loss_scale"] = scaler.scale;
  record["skipped_updates"] = scaler.skipped_total;
  record["oom_skipped_updates"] = t.oom_skipped_updates;
  record["peak_memory_mb"] = peak_mb;
  record["host_private_mb"] = double(host.private_bytes) / (1 << 20);
  record["host_shared_mb"] = double(host.shared_bytes) / (1 << 20);
  record["data_wait_s"] = t.data_wait_s;
  // null: the device runs asynchronously, so the host's times would not be the phases'.
  const auto measured = [&t](double s) {
    return t.split_measured ? nlohmann::ordered_json(s) : nlohmann::ordered_json();
  };
  record["forward_s"] = measured(t.forward_s);
  record["backward_s"] = measured(t.backward_s);
  record["grad_sync_s"] = measured(t.sync_s);
  record["optimizer_s"] = measured(t.optimizer_s);
  record["time_split"] = t.split_measured
                             ? "wall"
                             : "omitted: the device runs asynchronously (the host only queues its "
                               "work); --benchmark times the phases with device syncs";
  record["interval_s"] = seconds;
  record["elapsed_s"] = elapsed();
  record["eta_s"] = eta;
  metrics_.write(record);
  return loss;
}

namespace {

/// "name" or, for a set with a language pair, "name (en-de)".
std::string set_label(const SetScores& set) {
  return set.pair.empty() ? set.name : fmt::format("{} ({})", set.name, set.pair);
}

/// A metrics.jsonl record of one validation set.
nlohmann::ordered_json valid_record(int64_t step, int64_t epoch, const SetScores& set) {
  nlohmann::ordered_json record;
  record["type"] = "valid";
  record["set"] = set.name;
  if (!set.pair.empty()) record["pair"] = set.pair;
  record["step"] = step;
  record["epoch"] = epoch;
  record["loss"] = set.loss;
  record["nll"] = set.nll;
  record["ppl"] = perplexity(set.nll);
  record["tokens"] = set.tokens;
  if (set.bleu) {
    record["bleu"] = *set.bleu;
    record["chrf"] = *set.chrf;
  }
  return record;
}

}  // namespace

void Progress::validation(int64_t step, int64_t epoch, const ValidationResult& v) {
  clear();
  // With several sets each line names its set; the first set's line carries the decision.
  const bool several = !v.others.empty();
  const SetScores& first = v.first;
  log::info("valid", "step {} | epoch {}{} | loss {:.4f} | nll {:.4f} | ppl {:.2f}{}{} | {:.1f} s",
            step, epoch, several ? " | " + set_label(first) : std::string(), first.loss, first.nll,
            perplexity(first.nll),
            first.bleu ? fmt::format(" | BLEU {:.2f} | chrF {:.2f}", *first.bleu, *first.chrf) : "",
            v.best ? " | best" : fmt::format(" | {} without improvement", v.without_improvement),
            v.seconds);
  nlohmann::ordered_json record = valid_record(step, epoch, first);
  record["best"] = v.best;
  record["seconds"] = v.seconds;
  metrics_.write(record);
  for (const SetScores& set : v.others) {
    log::info("valid", "step {} | epoch {} | {} | loss {:.4f} | nll {:.4f} | ppl {:.2f}{}", step,
              epoch, set_label(set), set.loss, set.nll, perplexity(set.nll),
              set.bleu ? fmt::format(" | BLEU {:.2f} | chrF {:.2f}", *set.bleu, *set.chrf) : "");
    metrics_.write(valid_record(step, epoch, set));
  }
}

}  // namespace nmt::train
