#include "train/run_summary.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "util/error.h"
#include "util/log.h"

namespace nmt::train {

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kMaxSteps: return "max_steps";
    case StopReason::kMaxEpochs: return "max_epochs";
    case StopReason::kMaxMinutes: return "max_minutes";
    case StopReason::kSignal: return "signal";
    case StopReason::kEarlyStop: return "early_stop";
    case StopReason::kAlreadyDone: return "already_done";
    case StopReason::kCompleted: break;
  }
  return "completed";
}

const char* run_kind_name(RunKind kind) {
  switch (kind) {
    case RunKind::kBenchmark: return "benchmark";
    case RunKind::kDryRun: return "dry_run";
    case RunKind::kTrain: break;
  }
  return "train";
}

std::string run_summary_json(const RunSummary& s) {
  json::Object o;
  o.add("kind", run_kind_name(s.kind))
      .add("stop_reason", stop_reason_name(s.stop_reason))
      .add("final_step", s.final_step)
      .add("epoch", s.epoch)
      .add("world_size", s.world_size)
      .add("parameter_hashes", s.parameter_hashes)
      .add("peak_memory_mb", s.peak_memory_mb)
      .add("max_tokens", s.max_tokens);
  if (s.max_tokens_fit) o.add("max_tokens_fit", s.max_tokens_fit->to_json());
  else o.add_raw("max_tokens_fit", "null");
  json::Object amp;
  amp.add("mode", s.amp_mode).add("auto", s.amp_auto).add("reason", s.amp_reason);
  if (s.amp_timing) amp.add("timing", *s.amp_timing);
  else amp.add_raw("timing", "null");
  o.add("amp", amp);
  json::Object resumed;
  if (s.resumed_from) resumed.add("path", *s.resumed_from).add("step", s.resumed_step);
  if (resumed.empty()) o.add_raw("resumed_from", "null");
  else o.add("resumed_from", resumed);
  o.add("last_train_loss", s.last_train_loss)
      .add("last_valid_loss", s.last_valid_loss)
      .add("last_checkpoint", s.last_checkpoint)
      .add("tokens", s.tokens)
      .add("tokens_per_s", s.tokens_per_s)
      .add("train_s", s.train_s)
      .add("validation_s", s.validation_s)
      .add("checkpoint_s", s.checkpoint_s)
      .add("wall_s", s.wall_s);
  if (!s.details.empty()) o.add(run_kind_name(s.kind), s.details);
  return o.pretty();
}

void write_run_summary(const std::filesystem::path& run_dir, const RunSummary& summary) {
  std::filesystem::create_directories(run_dir);
  const std::filesystem::path file = run_dir / "summary.json";
  const std::filesystem::path temp = run_dir / "summary.json.tmp";
  {
    std::ofstream out(temp);
    out << run_summary_json(summary);
    NMT_CHECK(out.good(), Error, "{}: cannot write: {}", temp.string(), std::strerror(errno));
  }
  std::filesystem::rename(temp, file);
  log::info("summary", "wrote {}", file.string());
}

}  // namespace nmt::train
