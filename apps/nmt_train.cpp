// nmt-train: parse the command line, load and validate the config, prepare the data, then
// train (or, with --dry-run, plan the batches of every rank and stop).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include <ATen/Parallel.h>

#include "config/run_config.h"
#include "config/train_cli.h"
#include "data/batch_plan.h"
#include "data/prepare.h"
#include "dist/device.h"
#include "dist/worker_env.h"
#include "train/trainer.h"
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

train::ResumeFrom resume_from(const std::string& text) {
  if (text == "auto") return {train::ResumeFrom::Mode::kAuto, {}};
  if (text == "none") return {train::ResumeFrom::Mode::kNone, {}};
  return {train::ResumeFrom::Mode::kPath, text};
}

/// Trains this process's rank.
int train_rank(config::ConfigSources sources, config::RunConfig cfg, const std::string& resume,
               const dist::DeviceInfo& devices, const dist::WorkerEnv& worker) {
  // The checkpoint resumed from contributes its config (below --set), so read it first.
  auto saved = train::find_resume_checkpoint(cfg.run_dir, cfg.checkpoint, resume_from(resume));
  if (saved) {
    sources.checkpoint_yaml = saved->second.meta("config");
    sources.checkpoint_name = saved->first.string();
    cfg = config::load_run_config(sources);
  }
  const int64_t local = local_workers(cfg, devices);
  const int threads = cfg.train.threads > 0
                          ? static_cast<int>(cfg.train.threads)
                          : std::max(1, devices.cpu_cores / static_cast<int>(local));
  at::set_num_threads(threads);
  const bool gpu = devices.cuda_devices > 0;
  const c10::Device device = gpu ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(
                                                              worker.local_rank % devices.cuda_devices))
                                 : c10::Device(c10::kCPU);
  log::info("train", "device {}, {} intra-op thread(s), amp {}", device.str(), threads,
            amp::mode_name(cfg.amp.mode));
  const data::PreparedData prepared = data::prepare_data(
      cfg.data, cfg.run_dir, {threads, static_cast<uint64_t>(cfg.train.seed)});
  train::TrainerSetup setup;
  setup.model = cfg.model;
  setup.data = cfg.data;
  setup.train = cfg.train;
  setup.amp = cfg.amp;
  setup.checkpoint = cfg.checkpoint;
  setup.run_dir = cfg.run_dir;
  setup.config_yaml = config::to_yaml(cfg, /*with_docs=*/false);
  setup.config_hash = config::config_hash(cfg);
  setup.rank = worker.rank;
  setup.world_size = worker.world_size;
  setup.device = device;
  train::Trainer trainer(setup, prepared);
  if (saved) trainer.restore(saved->second, saved->first);
  saved.reset();  // free the loaded tensors before training
  train::install_stop_handlers();
  const train::TrainSummary summary = trainer.run();
  log::info("train", "done: {} steps, epoch {}, last train loss {:.4f}{}; checkpoint {}",
            summary.steps, summary.epoch, summary.last_train_loss,
            summary.last_valid_loss ? fmt::format(", valid loss {:.4f}", *summary.last_valid_loss)
                                    : std::string(),
            summary.last_checkpoint.string());
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
  NMT_CHECK(worker.world_size == 1 && local_workers(cfg, devices) == 1, ConfigError,
            "this build trains with one process; multi-process training (dist.nproc_per_node "
            "{}, launcher world size {}) arrives with the distributed-training issue",
            local_workers(cfg, devices), worker.world_size);
  return train_rank(command.sources, cfg, command.resume, devices, worker);
}

}  // namespace

int main(int argc, char** argv) {
  return nmt::run_main("nmt-train", [&] { return run(argc, argv); });
}
