#include "job/dry_run.h"

#include "job/fine_tune.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>

#include "data/batch_plan.h"
#include "data/prepare.h"
#include "job/rank_setup.h"
#include "train/max_tokens_fit.h"
#include "train/run_summary.h"
#include "util/log.h"
#include "util/timer.h"

namespace nmt::job {

int dry_run(config::RunConfig c, const amp::AmpChoice& amp, const dist::DeviceInfo& devices,
            const dist::WorkerEnv& worker) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t max_tokens = train::max_tokens_to_plan(c.data);
  const int64_t world = worker.launcher != dist::Launcher::kNone ? worker.world_size
                                                                 : local_workers(c, devices, worker);
  const std::filesystem::path run_dir = c.run_dir;
  prepare_init_vocabulary(c);  // a fine-tuning run encodes with its source's vocabulary
  data::PreparedData prepared = data::prepare_data(
      c.data, run_dir, {std::max(1, devices.cpu_cores), static_cast<uint64_t>(c.train.seed)});
  const auto plan_start = std::chrono::steady_clock::now();
  data::BatchPlanner planner(
      prepared.train,
      data::plan_options(c.data, max_tokens, world, static_cast<uint64_t>(c.train.seed)));
  const data::EpochPlan plan = planner.plan_epoch(1);
  const double plan_seconds = seconds_since(plan_start);
  const data::PlanStats ours = plan.stats(max_tokens);
  const data::PlanStats naive = planner.plan_naive(plan).stats(max_tokens);
  const int64_t update_freq = data::resolve_update_freq(c.data, max_tokens, world);
  log::info("dry-run", "{} ranks, {} padded tokens per batch per rank, update_freq {}: epoch 1 "
            "planned in {:.2f} s",
            world, max_tokens, update_freq, plan_seconds);
  std::cout << data::batch_stats_table(ours, naive) << std::flush;
  const std::filesystem::path stats_file = run_dir / "batch_stats.json";
  const std::vector<data::CorpusDraw> drawn = data::drawn_in_plan(prepared.train, plan);
  if (drawn.size() > 1) {
    for (const data::CorpusDraw& d : drawn)
      log::info("dry-run", "corpus {}: {} of its {} pairs drawn in epoch 1 (weight {})", d.name,
                d.drawn, d.pairs, d.weight);
  }
  std::ofstream(stats_file) << data::batch_stats_json(ours, naive, world, max_tokens, update_freq,
                                                      plan_seconds, drawn,
                                                      prepared.train.temperature());
  log::info("dry-run", "wrote {}", stats_file.string());

  train::RunSummary summary;
  summary.kind = train::RunKind::kDryRun;
  summary.world_size = world;
  summary.max_tokens = max_tokens;
  // "auto" where the choice awaits timing, which a dry run does not do.
  summary.amp_mode = amp.needs_timing ? amp::mode_name(std::nullopt) : amp::mode_name(amp.mode);
  summary.amp_auto = amp.automatic;
  summary.amp_reason = amp.reason;
  summary.wall_s = seconds_since(start);
  summary.details["batch_stats"] = stats_file.string();
  summary.details["plan_seconds"] = plan_seconds;
  summary.details["update_freq"] = update_freq;
  summary.details["steps"] = ours.steps;
  summary.details["padding_efficiency"] = ours.padding_efficiency;
  summary.details["max_rank_token_imbalance"] = ours.max_rank_token_imbalance;
  train::write_run_summary(run_dir, summary);
  return 0;
}

}  // namespace nmt::job
