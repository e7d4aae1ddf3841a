#include "job/train_job.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "data/corpus_set.h"
#include "data/prepare.h"
#include "dist/launcher.h"
#include "job/amp_agreement.h"
#include "job/dry_run.h"
#include "job/fine_tune.h"
#include "job/rank_setup.h"
#include "job/resume_policy.h"
#include "job/run_dir_owner.h"
#include "model/initialization.h"
#include "train/benchmark_run.h"
#include "train/run_summary.h"
#include "train/stop_signal.h"
#include "train/trainer.h"
#include "util/atomic_file.h"
#include "util/log.h"
#include "util/run_dir_lock.h"
#include "util/timer.h"

namespace nmt::job {
namespace {

/// What a run does
enum class RunKind { kDryRun, kLaunch, kBenchmark, kTrain };

/// Logs what this invocation would run: devices, workers, data and model shape.
void log_plan(const config::RunConfig& c, const dist::DeviceInfo& devices,
              const dist::WorkerEnv& worker) {
  log::info("plan", "LibTorch {}{}", devices.torch_version,
            devices.cuda_compiled ? fmt::format(" (CUDA {} build, NCCL {})", devices.cuda_version,
                                                devices.nccl_version)
                                  : std::string(" (CPU build)"));
  for (const std::string& name : devices.device_names) log::info("plan", "GPU: {}", name);
  const int64_t workers = local_workers(c, devices, worker);
  if (devices.cuda_devices == 0)
    log::info("plan", "{}: {} CPU worker(s), Gloo", devices.no_cuda_reason, workers);
  else
    log::info("plan", "{}",
              dist::describe_gpu_workers(c.dist.backend, workers, devices.cuda_devices));
  if (worker.launcher != dist::Launcher::kNone) {
    log::info("plan", "started by {} as rank {} of {} (local rank {}, pid {})",
              dist::launcher_name(worker.launcher), worker.rank, worker.world_size,
              worker.local_rank, ::getpid());
  }
  log::info("plan", "run directory {}; config hash {}", c.run_dir, config::config_hash(c));
  log::info("plan", "model: {}+{} layers, d_model {}, {} heads, ffn {}", c.model.encoder_layers,
            c.model.decoder_layers, c.model.d_model, c.model.heads, c.model.ffn_dim);
  std::string corpora;
  for (const data::CorpusOptions& corpus : data::training_corpora(c.data)) {
    corpora += (corpora.empty() ? "" : ", ") + fmt::format("{} / {}", corpus.src, corpus.tgt);
    if (!c.data.train.empty())
      corpora += fmt::format(" ({}, weight {})", corpus.name, corpus.weight);
  }
  log::info("plan", "data: {}; {} padded tokens per batch per rank, update_freq {}", corpora,
            train::describe_max_tokens(c.data), c.data.update_freq);
}

/// Built-in launcher: prepares the data once, then starts this node's workers (this same
/// command line in child processes) and supervises them.
/// `as_run` is the config the workers will have (config_to_resume): the data is prepared with
/// its data section, so that a resume after an edit of the YAML's encodes nothing the workers
/// would not use (and delete again).
int launch(const config::TrainCommand& command, const config::RunConfig& cfg,
           const config::RunConfig& as_run, int64_t workers, int argc, char** argv,
           const dist::DeviceInfo& devices, const RunDirLock* run_dir_lock) {
  // Before any worker starts, so that a restart after a failure early in the first attempt
  // does not resume the replaced run's checkpoints (node 0's launcher: rank 0's folder).
  if (command.node_rank == 0 && command.benchmark_steps == 0)
    set_aside_replaced_checkpoints(cfg, command.resume);
  // Vocabulary and token caches are built here, so workers only load them.
  prepare_init_vocabulary(as_run);
  data::prepare_data(as_run.data, as_run.run_dir,
                     {std::max(1, devices.cpu_cores), static_cast<uint64_t>(as_run.train.seed)});
  dist::LaunchOptions options;
  options.nproc_per_node = static_cast<int>(workers);
  options.nnodes = command.nnodes;
  options.node_rank = command.node_rank;
  options.master_addr = cfg.dist.master_addr;
  options.master_port = static_cast<int>(cfg.dist.master_port);
  // Several nodes must agree on a port without talking first: torchrun's default.
  if (options.nnodes > 1 && options.master_port == 0) options.master_port = 29500;
  options.max_restarts = command.max_restarts;
  options.stop_grace = std::chrono::seconds(cfg.dist.stop_grace_s);
  if (cfg.log.to_file) options.log_dir = std::filesystem::path(cfg.run_dir) / "logs";
  // The workers share the lock: the run stays locked until the last of them has exited.
  if (run_dir_lock && run_dir_lock->fd() >= 0) options.inherited_fds.push_back(run_dir_lock->fd());
  options.argv.push_back(std::filesystem::read_symlink("/proc/self/exe").string());
  for (int i = 1; i < argc; ++i) options.argv.emplace_back(argv[i]);
  log::info("launch", "{} worker(s) on node {} of {}{}", options.nproc_per_node, options.node_rank,
            options.nnodes,
            options.max_restarts ? fmt::format(", up to {} restart(s)", options.max_restarts) : "");
  return dist::launch_workers(options);
}

/// --benchmark: timed updates; rank 0 prints the table and writes benchmark.json.
int benchmark(const config::TrainCommand& command, const Rank& rank, train::RunSummary& summary) {
  train::BenchmarkOptions options;
  options.steps = command.benchmark_steps;
  options.warmup = command.benchmark_warmup;
  options.phase_steps = command.benchmark_phase_steps >= 0
                            ? command.benchmark_phase_steps
                            : (rank.setup.device.is_cuda() ? command.benchmark_steps : 0);
  options.synthetic = command.synthetic;
  options.synthetic_length = command.synthetic_length;
  options.dump_batches = command.dump_batches;
  log::info("benchmark", "{} warm-up and {} timed update(s){}", options.warmup, options.steps,
            options.synthetic ? " on synthetic batches" : "");
  const train::BenchmarkResult result = train::run_benchmark(rank.setup, rank.data, options);
  summary.final_step = options.warmup + options.steps;
  summary.peak_memory_mb = result.peak_memory_mb;
  summary.tokens_per_s = result.tokens_per_s();
  if (rank.setup.rank != 0) return 0;
  std::cout << train::benchmark_table(result) << std::flush;
  const std::filesystem::path file = rank.setup.run_dir / "benchmark.json";
  std::filesystem::create_directories(file.parent_path());
  write_file_atomically(file, train::benchmark_json(result));
  log::info("benchmark", "wrote {}", file.string());
  summary.details["benchmark_json"] = file.string();
  summary.details["mfu"] = result.mfu();
  return 0;
}

/// Trains this process's rank.
int train_rank(Rank& rank, train::RunSummary& summary) {
  // A resume copies every parameter in (a missing one is an error) and restores the random
  // streams after, so the model is built without drawing initial values it would overwrite.
  std::optional<model::SkipInitialization> skip;
  if (rank.resume) skip.emplace();
  train::Trainer trainer(rank.setup, rank.data);
  skip.reset();
  if (rank.resume)
    trainer.restore(rank.resume->data, rank.resume->path);
  else if (rank.init)
    trainer.initialize_from(load_init_weights(*rank.init), rank.init->path);
  rank.resume.reset();  // free the loaded tensors before training
  rank.init.reset();
  train::install_stop_handlers();
  summary = trainer.run();
  log::info(
      "train", "done: {} steps, epoch {}{}{}; checkpoint {}", summary.final_step, summary.epoch,
      summary.last_train_loss ? fmt::format(", last train loss {:.4f}", *summary.last_train_loss)
                              : std::string(),
      summary.last_valid_loss ? fmt::format(", valid loss {:.4f}", *summary.last_valid_loss)
                              : std::string(),
      summary.last_checkpoint);
  return 0;
}

/// The rank's run (training or benchmark), ending with summary.json from rank 0.
int run_rank(const config::TrainCommand& command, const config::RunConfig& cfg,
             const dist::DeviceInfo& devices, const dist::WorkerEnv& worker, RunKind kind,
             RunDirClaim claim) {
  const auto start = std::chrono::steady_clock::now();
  config::ResumeFrom resume = command.resume;
  if (kind == RunKind::kBenchmark) {
    resume = {config::ResumeFrom::Mode::kNone, {}};  // a benchmark always starts fresh
  } else if (worker.restart_count > 0) {
    // A restart continues from the job's newest checkpoint, not from where it first started.
    resume = resume_after_restart(cfg, command.resume);
    if (resume.mode != command.resume.mode || resume.path != command.resume.path)
      log::info(
          "train",
          "restart {}: resuming from the newest checkpoint of this job rather "
          "than --resume {}",
          worker.restart_count,
          command.resume.mode == config::ResumeFrom::Mode::kNone ? "none" : command.resume.path);
  }
  Rank rank = set_up_rank(command, cfg, resume, devices, worker, std::move(claim));
  train::RunSummary summary;
  const int code =
      kind == RunKind::kBenchmark ? benchmark(command, rank, summary) : train_rank(rank, summary);
  if (rank.setup.rank != 0) return code;
  // The fields every kind of run has are the job's (run_summary.h); the rest came from the
  // trainer or the benchmark above.
  summary.kind = kind == RunKind::kBenchmark ? train::RunKind::kBenchmark : train::RunKind::kTrain;
  summary.world_size = rank.setup.world_size;
  summary.max_tokens = rank.setup.max_tokens;
  summary.max_tokens_fit = rank.max_tokens_fit;
  summary.amp_mode = amp::mode_name(rank.amp.mode);
  summary.amp_auto = rank.amp.automatic;
  summary.amp_reason = rank.amp.reason;
  if (rank.amp_timing) summary.amp_timing = rank.amp_timing->to_json();
  summary.wall_s = seconds_since(start);
  train::write_run_summary(rank.setup.run_dir, summary);
  return code;
}

}  // namespace

int run_train_command(const config::TrainCommand& command, int argc, char** argv) {
  const dist::WorkerEnv worker = dist::detect_worker_env();
  // Console logging first, so config errors and warnings are formatted like everything else.
  log::init(log::LogOptions{}, worker.rank, worker.world_size, !worker.launched_by_us);
  std::vector<std::string> config_warnings;
  const config::RunConfig cfg = config::load_run_config(command.sources, &config_warnings);
  log::init(cfg.log, worker.rank, worker.world_size, !worker.launched_by_us);
  dist::show_libtorch_logs(cfg.log.level <= log::Level::kDebug);
  if (command.print_config) {
    std::cout << config::to_yaml(cfg) << std::flush;
    return 0;
  }
  // CUDA is probed here even in a launcher: its workers exec a fresh image, so they inherit
  // no CUDA state.
  const dist::DeviceInfo devices = dist::probe_devices();
  RunKind kind = command.benchmark_steps > 0 ? RunKind::kBenchmark : RunKind::kTrain;
  if (command.dry_run) kind = RunKind::kDryRun;
  // The config the workers will have: a resumed run's includes its checkpoint's (its
  // dist.nproc_per_node among it, so resuming needs no flags). The plan shows it, and this
  // node's workers are counted from it.
  const config::RunConfig as_run =
      kind == RunKind::kTrain && worker.launcher == dist::Launcher::kNone
          ? config_to_resume(command.sources, cfg, command.resume)
          : cfg;
  const int64_t workers = local_workers(as_run, devices, worker);
  if (kind != RunKind::kDryRun && worker.launcher == dist::Launcher::kNone &&
      (workers > 1 || command.nnodes > 1))
    kind = RunKind::kLaunch;
  // The run directory's lock before anything writes there, its log files included
  // (job/run_dir_owner.h): node 0's launcher holds it while its workers live (they take none);
  // else rank 0 does, and a refused process stops here when it is alone (a job's ranks hear
  // of it in their first gather).
  RunDirClaim claim;
  if (kind == RunKind::kLaunch && command.node_rank == 0) {
    claim.lock = std::make_shared<RunDirLock>(RunDirLock::acquire(cfg.run_dir));
  } else if (kind == RunKind::kTrain || kind == RunKind::kBenchmark) {
    claim = claim_run_dir(cfg.run_dir, worker);
    if (worker.world_size <= 1) agree_on_run_dir_claim(nullptr, claim);
  }
  if (cfg.log.to_file) {
    log::add_file_sink(std::filesystem::path(cfg.run_dir) / "logs" /
                       (kind == RunKind::kLaunch
                            ? fmt::format("launcher-node{}.log", command.node_rank)
                            : fmt::format("rank{}.log", worker.rank)));
  }
  // The plan (and its config hash, the one checkpoints store) shows amp.mode resolved on this
  // machine, unless it awaits timing. The run's own decision is rank 0's, made again in
  // set_up_rank and taken by every rank there (job/amp_agreement.h), timing included; that
  // choice and its reason reach summary.json.
  // Once per run: by the process that plans it (the launcher, or rank 0 of an outside
  // launcher's workers), not by every worker that loads the config again.
  if (worker.rank == 0 && !worker.launched_by_us && command.node_rank == 0)
    for (const std::string& warning : config_warnings) log::warn("config", "{}", warning);
  const amp::AmpChoice amp = choose_amp(as_run.amp, devices);
  config::RunConfig planned = as_run;
  if (!amp.needs_timing) planned.amp.mode = amp.mode;
  log_plan(planned, devices, worker);
  log::info("plan", "precision: {} ({}{})",
            amp.needs_timing ? "timed at start" : amp::mode_name(amp.mode),
            amp.automatic ? "amp.mode auto: " : "", amp.reason);
  switch (kind) {
    case RunKind::kDryRun:
      return dry_run(planned, amp, devices, worker);
    case RunKind::kLaunch:
      return launch(command, cfg, as_run, workers, argc, argv, devices, claim.lock.get());
    case RunKind::kBenchmark:
    case RunKind::kTrain:
      break;
  }
  return run_rank(command, cfg, devices, worker, kind, std::move(claim));
}

}  // namespace nmt::job
