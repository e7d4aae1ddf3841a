// nmt-train: parse the command line, load and validate the config, then run.
// Until the training loop lands a run prints its plan and stops; --dry-run prepares the data
// and plans the batches of every rank.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include "config/run_config.h"
#include "config/train_cli.h"
#include "data/batch_plan.h"
#include "data/prepare.h"
#include "dist/device.h"
#include "dist/worker_env.h"
#include "util/error.h"
#include "util/log.h"
#include "util/main_guard.h"

namespace {

using namespace nmt;

/// Workers this node runs: dist.nproc_per_node, or one per GPU (1 without GPU).
int64_t local_workers(const config::RunConfig& c, const dist::DeviceInfo& devices) {
  if (c.dist.nproc_per_node > 0) return c.dist.nproc_per_node;
  return devices.cuda_devices > 0 ? devices.cuda_devices : 1;
}

/// Logs what this invocation would run: devices, workers, data and model shape.
void log_plan(const config::RunConfig& c, const dist::DeviceInfo& devices,
              const dist::WorkerEnv& worker) {
  log::info("plan", "LibTorch {}{}", devices.torch_version,
            devices.cuda_compiled ? fmt::format(" (CUDA {} build, NCCL {})", devices.cuda_version,
                                                devices.nccl_version)
                                  : std::string(" (CPU build)"));
  for (const std::string& name : devices.device_names) log::info("plan", "GPU: {}", name);
  const int64_t workers = local_workers(c, devices);
  if (devices.cuda_devices == 0)
    log::info("plan", "{}: {} CPU worker(s), Gloo", devices.no_cuda_reason, workers);
  else
    log::info("plan", "{} worker(s), one per GPU, NCCL", workers);
  if (worker.launcher != "none") {
    log::info("plan", "started by {} as rank {} of {} (local rank {})", worker.launcher,
              worker.rank, worker.world_size, worker.local_rank);
  }
  log::info("plan", "run directory {}; config hash {}", c.run_dir, config::config_hash(c));
  log::info("plan", "model: {}+{} layers, d_model {}, {} heads, ffn {}", c.model.encoder_layers,
            c.model.decoder_layers, c.model.d_model, c.model.heads, c.model.ffn_dim);
  log::info("plan", "data: {} / {}; {} padded tokens per batch per rank, update_freq {}",
            c.data.train_src, c.data.train_tgt, c.data.max_tokens, c.data.update_freq);
}

/// --dry-run: vocabulary, token cache and the epoch-1 plan of every rank, without training.
int dry_run(const config::RunConfig& c, const dist::DeviceInfo& devices,
            const dist::WorkerEnv& worker) {
  const int64_t world =
      worker.launcher != "none" ? worker.world_size : local_workers(c, devices);
  const std::filesystem::path run_dir = c.run_dir;
  data::PreparedData prepared = data::prepare_data(
      c.data, run_dir, {std::max(1, devices.cpu_cores), static_cast<uint64_t>(c.train.seed)});
  const auto start = std::chrono::steady_clock::now();
  data::BatchPlanner planner(prepared.train.cache,
                             data::plan_options(c.data, world, static_cast<uint64_t>(c.train.seed)));
  const data::EpochPlan plan = planner.plan_epoch(1);
  const double plan_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const data::PlanStats ours = plan.stats(c.data.max_tokens);
  const data::PlanStats naive = planner.plan_naive(plan).stats(c.data.max_tokens);
  const int64_t update_freq = data::resolve_update_freq(c.data, world);
  log::info("dry-run", "{} ranks, {} padded tokens per batch per rank, update_freq {}: epoch 1 "
            "planned in {:.2f} s",
            world, c.data.max_tokens, update_freq, plan_seconds);
  std::cout << data::batch_stats_table(ours, naive) << std::flush;
  const std::filesystem::path stats_file = run_dir / "batch_stats.json";
  std::ofstream(stats_file) << data::batch_stats_json(ours, naive, world, c.data.max_tokens,
                                                      update_freq, plan_seconds);
  log::info("dry-run", "wrote {}", stats_file.string());
  return 0;
}

int run(int argc, char** argv) {
  config::TrainCommand command = config::parse_train_command(argc, argv);
  if (command.exit_code) return *command.exit_code;
  const dist::WorkerEnv worker = dist::detect_worker_env();
  // Console logging first, so config errors and warnings are formatted like everything else.
  log::init(log::LogOptions{}, worker.rank, worker.world_size);
  const config::RunConfig cfg = config::load_run_config(command.sources);
  log::init(cfg.log, worker.rank, worker.world_size);
  if (command.print_config) {
    std::cout << config::to_yaml(cfg) << std::flush;
    return 0;
  }
  if (cfg.log.to_file)
    log::add_file_sink(std::filesystem::path(cfg.run_dir) / "logs" /
                       fmt::format("rank{}.log", worker.rank));
  const dist::DeviceInfo devices = dist::probe_devices();
  log_plan(cfg, devices, worker);
  if (command.dry_run) return dry_run(cfg, devices, worker);
  log::warn("plan", "this build has no training loop yet (it arrives with the training-loop "
                    "issue); stopping after the plan");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return nmt::run_main("nmt-train", [&] { return run(argc, argv); });
}
