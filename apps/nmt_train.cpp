// nmt-train: parse the command line, load and validate the config, prepare the data, then
// train (or, with --dry-run, plan the batches of every rank and stop).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include <unistd.h>

#include <ATen/Parallel.h>

#include "config/run_config.h"
#include "config/train_cli.h"
#include "data/batch_plan.h"
#include "data/prepare.h"
#include "dist/device.h"
#include "dist/host_allocator.h"
#include "dist/launcher.h"
#include "dist/process_group.h"
#include "dist/worker_env.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/log.h"
#include "util/main_guard.h"

namespace {

using namespace nmt;

/// Workers this node runs: dist.nproc_per_node, or one per GPU (1 without GPU).
int64_t local_workers(const config::RunConfig& c, const dist::DeviceInfo& devices) {
  // Under a launcher its count is what runs here.
  const dist::WorkerEnv worker = dist::detect_worker_env();
  if (worker.launcher != "none" && worker.local_world_size > 0) return worker.local_world_size;
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
    log::info("plan", "started by {} as rank {} of {} (local rank {}, pid {})", worker.launcher,
              worker.rank, worker.world_size, worker.local_rank, ::getpid());
  }
  log::info("plan", "run directory {}; config hash {}", c.run_dir, config::config_hash(c));
  log::info("plan", "model: {}+{} layers, d_model {}, {} heads, ffn {}", c.model.encoder_layers,
            c.model.decoder_layers, c.model.d_model, c.model.heads, c.model.ffn_dim);
  log::info("plan", "data: {} / {}; {} padded tokens per batch per rank, update_freq {}",
            c.data.train_src, c.data.train_tgt,
            c.data.max_tokens == data::kMaxTokensAuto ? std::string("auto (measured at start)")
                                                      : std::to_string(c.data.max_tokens),
            c.data.update_freq);
}

/// --dry-run: vocabulary, token cache and the epoch-1 plan of every rank, without training.
int dry_run(config::RunConfig c, const dist::DeviceInfo& devices,
            const dist::WorkerEnv& worker) {
  if (c.data.max_tokens == data::kMaxTokensAuto) {
    c.data.max_tokens = data::unmeasured_max_tokens(c.data);
    log::info("dry-run", "data.max_tokens auto is measured when training starts; this plan uses "
              "{} (--set data.max_tokens=N plans another budget)", c.data.max_tokens);
  }
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

/// --benchmark: timed updates; rank 0 prints the summary and writes benchmark.json.
int run_benchmark(const config::TrainCommand& command, const config::RunConfig& cfg,
                  train::Trainer& trainer, const dist::WorkerEnv& worker) {
  train::BenchmarkOptions options;
  options.steps = command.benchmark_steps;
  options.warmup = command.benchmark_warmup;
  options.synthetic = command.synthetic;
  options.synthetic_length = command.synthetic_length;
  options.dump_batches = command.dump_batches;
  log::info("benchmark", "{} warm-up and {} timed update(s){}", options.warmup, options.steps,
            options.synthetic ? " on synthetic batches" : "");
  const train::BenchmarkResult result = trainer.benchmark(options);
  if (worker.rank != 0) return 0;
  std::cout << train::benchmark_table(result) << std::flush;
  const std::filesystem::path file = std::filesystem::path(cfg.run_dir) / "benchmark.json";
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << train::benchmark_json(result);
  log::info("benchmark", "wrote {}", file.string());
  return 0;
}

/// Resolves data.max_tokens: auto on a throwaway trainer (its planner gets a provisional
/// budget); returns the budget every rank agreed on.
int64_t fit_max_tokens(train::TrainerSetup setup, const data::PreparedData& prepared,
                       int64_t ranks_per_device) {
  const data::DataOptions& d = setup.data;
  setup.data.max_tokens = data::unmeasured_max_tokens(d);
  train::MaxTokensFit fit;
  {
    train::Trainer probe(setup, prepared);
    fit = probe.fit_max_tokens(ranks_per_device);
  }
  if (!fit.fallback.empty()) {
    log::warn("train", "data.max_tokens auto: {}; using {}", fit.fallback, fit.max_tokens);
    return fit.max_tokens;
  }
  log::info("train",
            "data.max_tokens auto: {} ({} sentences of the longest length, {} tokens, peak "
            "{:.0f} MiB of {:.0f} MiB allowed = {} x {:.0f} MiB){}; {} steps measured in {:.1f} s",
            fit.max_tokens, fit.sentences, fit.length, fit.peak_mb, fit.limit_mb,
            d.auto_memory_fraction, fit.memory_mb,
            fit.max_tokens < fit.sentences * fit.length ? ", the smallest rank's fit" : "",
            fit.probes, fit.seconds);
  return fit.max_tokens;
}

/// Trains this process's rank.
int train_rank(const config::TrainCommand& command, config::RunConfig cfg,
               const std::string& resume, const dist::DeviceInfo& devices,
               const dist::WorkerEnv& worker) {
  config::ConfigSources sources = command.sources;
  const bool benchmark = command.benchmark_steps > 0;
  // The checkpoint resumed from contributes its config (below --set), so read it first. A
  // benchmark always starts fresh.
  // Under --resume auto a checkpoint of another model (one copied in, or a config changed
  // since) is passed over for an older one that fits.
  const auto other_model = [&cfg](const checkpoint::CheckpointData& data) {
    const auto config = data.metadata.find("config");
    if (config == data.metadata.end()) return std::optional<std::string>("no config in its metadata");
    return config::model_difference(cfg, config::parse_stored_config(config->second, "checkpoint"));
  };
  auto saved = benchmark ? std::nullopt
                         : train::find_resume_checkpoint(cfg.run_dir, cfg.checkpoint,
                                                         resume_from(resume), other_model);
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
  if (cfg.train.cache_host_memory) dist::install_caching_host_allocator();
  const bool gpu = devices.cuda_devices > 0;
  const c10::Device device = gpu ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(
                                                              worker.local_rank % devices.cuda_devices))
                                 : c10::Device(c10::kCPU);
  log::info("train", "device {}, {} intra-op thread(s), amp {}", device.str(), threads,
            amp::mode_name(cfg.amp.mode));
  if (cfg.amp.mode == amp::AmpMode::kFp16 && !device.is_cuda()) {
    // Measured on the tiny config, 2 threads: fp16 2.70 s a step, fp32 0.145 s, bf16 0.111 s.
    log::warn("train", "amp.mode fp16 on CPU: LibTorch has few fast half-precision CPU kernels, "
              "so a step takes many times longer than in fp32 or bf16 (18x on the tiny config); "
              "use bf16 on CPU");
  }
  std::shared_ptr<dist::Communicator> communicator;
  // dist.backend nccl asked for by name takes the process-group path even for one rank, so a
  // single GPU can check it.
  if (worker.world_size > 1 || cfg.dist.backend == dist::Backend::kNccl) {
    dist::CommunicatorOptions options;
    options.master_addr = worker.master_addr;
    options.master_port = worker.master_port > 0 ? worker.master_port : dist::find_free_port();
    options.rank = worker.rank;
    options.world_size = worker.world_size;
    options.agent_store = worker.agent_store;
    options.restart_count = worker.restart_count;
    options.timeout = std::chrono::seconds(cfg.dist.timeout_s);
    options.use_nccl = device.is_cuda() && cfg.dist.backend != dist::Backend::kGloo;
    NMT_CHECK(!(cfg.dist.backend == dist::Backend::kNccl && !device.is_cuda()), ConfigError,
              "dist.backend nccl needs CUDA devices, but {}", devices.no_cuda_reason);
    options.device = device;
    communicator = std::make_shared<dist::Communicator>(options);
  }
  // Rank 0 builds vocabulary and token caches first; the others then only load them.
  if (communicator && worker.rank != 0) communicator->barrier();
  const data::PreparedData prepared = data::prepare_data(
      cfg.data, cfg.run_dir, {threads, static_cast<uint64_t>(cfg.train.seed)});
  if (communicator && worker.rank == 0) communicator->barrier();
  const auto trainer_setup = [&](const config::RunConfig& c) {
    train::TrainerSetup setup;
    setup.model = c.model;
    setup.data = c.data;
    setup.train = c.train;
    setup.amp = c.amp;
    setup.checkpoint = c.checkpoint;
    setup.dist = c.dist;
    setup.communicator = communicator;
    setup.run_dir = c.run_dir;
    setup.config_yaml = config::to_yaml(c, /*with_docs=*/false);
    setup.config_hash = config::config_hash(c);
    setup.rank = worker.rank;
    setup.world_size = worker.world_size;
    setup.device = device;
    return setup;
  };
  // data.max_tokens: auto is measured with a trainer of its own, then written into the config
  // as a number: checkpoints store it, so a resumed run plans the same batches.
  if (cfg.data.max_tokens == data::kMaxTokensAuto) {
    const int64_t ranks_per_device =
        gpu ? (local + devices.cuda_devices - 1) / devices.cuda_devices : 1;
    cfg.data.max_tokens = fit_max_tokens(trainer_setup(cfg), prepared, ranks_per_device);
  }
  train::Trainer trainer(trainer_setup(cfg), prepared);
  if (saved) trainer.restore(saved->second, saved->first);
  saved.reset();  // free the loaded tensors before training
  if (benchmark) return run_benchmark(command, cfg, trainer, worker);
  train::install_stop_handlers();
  const train::TrainSummary summary = trainer.run();
  log::info("train", "done: {} steps, epoch {}, last train loss {:.4f}{}; checkpoint {}",
            summary.steps, summary.epoch, summary.last_train_loss,
            summary.last_valid_loss ? fmt::format(", valid loss {:.4f}", *summary.last_valid_loss)
                                    : std::string(),
            summary.last_checkpoint.string());
  return 0;
}

/// Built-in launcher: prepares the data once, then starts this node's workers (this same
/// command line in child processes) and supervises them.
int launch(const config::TrainCommand& command, const config::RunConfig& cfg,
           const dist::DeviceInfo& devices, int argc, char** argv) {
  // Vocabulary and token caches are built here, so workers only load them.
  data::prepare_data(cfg.data, cfg.run_dir,
                     {std::max(1, devices.cpu_cores), static_cast<uint64_t>(cfg.train.seed)});
  dist::LaunchOptions options;
  options.nproc_per_node = static_cast<int>(local_workers(cfg, devices));
  options.nnodes = command.nnodes;
  options.node_rank = command.node_rank;
  options.master_addr = cfg.dist.master_addr;
  options.master_port = static_cast<int>(cfg.dist.master_port);
  // Several nodes must agree on a port without talking first: torchrun's default.
  if (options.nnodes > 1 && options.master_port == 0) options.master_port = 29500;
  options.max_restarts = command.max_restarts;
  if (cfg.log.to_file) options.log_dir = std::filesystem::path(cfg.run_dir) / "logs";
  options.argv.push_back(std::filesystem::read_symlink("/proc/self/exe").string());
  for (int i = 1; i < argc; ++i) options.argv.emplace_back(argv[i]);
  log::info("launch", "{} worker(s) on node {} of {}{}", options.nproc_per_node,
            options.node_rank, options.nnodes,
            options.max_restarts ? fmt::format(", up to {} restart(s)", options.max_restarts) : "");
  return dist::launch_workers(options);
}

int run(int argc, char** argv) {
  config::TrainCommand command = config::parse_train_command(argc, argv);
  if (command.exit_code) return *command.exit_code;
  const dist::WorkerEnv worker = dist::detect_worker_env();
  // Console logging first, so config errors and warnings are formatted like everything else.
  log::init(log::LogOptions{}, worker.rank, worker.world_size, !worker.launched_by_us);
  const config::RunConfig cfg = config::load_run_config(command.sources);
  log::init(cfg.log, worker.rank, worker.world_size, !worker.launched_by_us);
  dist::show_libtorch_logs(cfg.log.level <= log::Level::kDebug);
  if (command.print_config) {
    std::cout << config::to_yaml(cfg) << std::flush;
    return 0;
  }
  // CUDA is probed here even in a launcher: its workers exec a fresh image, so they inherit
  // no CUDA state.
  const dist::DeviceInfo devices = dist::probe_devices();
  const bool launcher = !command.dry_run && worker.launcher == "none" &&
                        (local_workers(cfg, devices) > 1 || command.nnodes > 1);
  if (cfg.log.to_file) {
    log::add_file_sink(std::filesystem::path(cfg.run_dir) / "logs" /
                       (launcher ? fmt::format("launcher-node{}.log", command.node_rank)
                                 : fmt::format("rank{}.log", worker.rank)));
  }
  log_plan(cfg, devices, worker);
  if (command.dry_run) return dry_run(cfg, devices, worker);
  if (launcher) return launch(command, cfg, devices, argc, argv);
  std::string resume = command.resume;
  if (worker.restart_count > 0 && resume == "none") {
    log::info("train", "restart {}: resuming from the newest checkpoint despite --resume none",
              worker.restart_count);
    resume = "auto";
  }
  return train_rank(command, cfg, resume, devices, worker);
}

}  // namespace

int main(int argc, char** argv) {
  return nmt::run_main("nmt-train", [&] { return run(argc, argv); });
}
