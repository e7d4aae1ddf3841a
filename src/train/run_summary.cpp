#include "train/run_summary.h"

#include "util/atomic_file.h"
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
  using Json = nlohmann::ordered_json;
  Json o;
  o["kind"] = run_kind_name(s.kind);
  o["stop_reason"] = stop_reason_name(s.stop_reason);
  o["final_step"] = s.final_step;
  o["oom_skipped_updates"] = s.oom_skipped_updates;
  o["epoch"] = s.epoch;
  o["world_size"] = s.world_size;
  o["parameter_hashes"] = s.parameter_hashes;
  o["peak_memory_mb"] = s.peak_memory_mb;
  o["max_tokens"] = s.max_tokens;
  o["max_tokens_fit"] = s.max_tokens_fit ? s.max_tokens_fit->to_json() : Json();
  o["amp"] = {{"mode", s.amp_mode},
              {"auto", s.amp_auto},
              {"reason", s.amp_reason},
              {"timing", json::or_null(s.amp_timing)}};
  o["resumed_from"] = s.resumed_from
                          ? Json{{"path", *s.resumed_from}, {"step", json::or_null(s.resumed_step)}}
                          : Json();
  o["last_train_loss"] = json::or_null(s.last_train_loss);
  o["last_valid_loss"] = json::or_null(s.last_valid_loss);
  o["last_checkpoint"] = s.last_checkpoint;
  o["tokens"] = s.tokens;
  o["tokens_per_s"] = s.tokens_per_s;
  o["train_s"] = s.train_s;
  o["validation_s"] = s.validation_s;
  o["checkpoint_s"] = s.checkpoint_s;
  o["wall_s"] = s.wall_s;
  if (!s.details.empty()) o[run_kind_name(s.kind)] = s.details;
  return json::pretty(o);
}

void write_run_summary(const std::filesystem::path& run_dir, const RunSummary& summary) {
  std::filesystem::create_directories(run_dir);
  const std::filesystem::path file = run_dir / "summary.json";
  write_file_atomically(file, run_summary_json(summary));
  log::info("summary", "wrote {}", file.string());
}

}  // namespace nmt::train
