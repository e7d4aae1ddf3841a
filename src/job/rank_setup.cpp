#include "job/rank_setup.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/Parallel.h>

#include "dist/host_allocator.h"
#include "dist/process_group.h"
#include "dist/rendezvous.h"
#include "job/amp_agreement.h"
#include "job/resume_policy.h"
#include "job/run_dir_owner.h"
#include "train/amp_timing.h"
#include "util/error.h"
#include "util/log.h"

namespace nmt::job {
namespace {

/// Intra-op threads (train.threads, else the CPUs shared by this node's workers, or this
/// worker's own when an outside launcher bound it to CPUs of its own), and the caching host
/// allocator when train.cache_host_memory asks for it. Returns the threads.
int set_up_threads(const config::RunConfig& cfg, const dist::DeviceInfo& devices, int64_t local,
                   const dist::WorkerEnv& worker) {
  // Our launcher's workers inherit its mask (shared); Slurm's --cpu-bind or a taskset per rank
  // gives each its own, which dividing again would leave a share of idle.
  const bool own_cpus = devices.cpus_bound_apart && !worker.launched_by_us &&
                        worker.launcher != dist::Launcher::kNone;
  const int threads = cfg.train.threads > 0 ? static_cast<int>(cfg.train.threads)
                      : own_cpus            ? std::max(1, devices.cpu_cores)
                                 : std::max(1, devices.cpu_cores / static_cast<int>(local));
  at::set_num_threads(threads);
  if (cfg.train.cache_host_memory) {
    dist::HostAllocatorOptions cache;
    cache.local_workers = static_cast<int>(local);  // they share the machine's memory
    dist::install_caching_host_allocator(cache);
  }
  return threads;
}

/// This rank's device, made current: its GPU (local rank modulo the GPUs), else the CPU.
c10::Device set_up_device(const config::RunConfig& cfg, const dist::DeviceInfo& devices,
                          const dist::WorkerEnv& worker, int threads) {
  const c10::Device device =
      devices.cuda_devices == 0
          ? c10::Device(c10::kCPU)
          : c10::Device(c10::kCUDA,
                        static_cast<c10::DeviceIndex>(worker.local_rank % devices.cuda_devices));
  if (device.is_cuda()) dist::use_cuda_device(device.index());
  log::info("train", "device {}, {} intra-op thread(s)", device.str(), threads);
  if (cfg.amp.mode == amp::AmpMode::kFp16 && !device.is_cuda()) {
    // Measured on the tiny config, 2 threads: fp16 2.70 s a step, fp32 0.145 s, bf16 0.111 s.
    log::warn("train",
              "amp.mode fp16 on CPU: LibTorch has few fast half-precision CPU kernels, "
              "so a step takes many times longer than in fp32 or bf16 (18x on the tiny config); "
              "use bf16 on CPU");
  }
  return device;
}

/// The rendezvous of the job, or nothing for one process. dist.backend nccl asked for by name
/// takes the process-group path even for one rank, so that a single GPU can check it. It
/// comes before the threads and the device are chosen: it counts the ranks on this host.
std::optional<dist::Rendezvous> join(const config::RunConfig& cfg, const dist::WorkerEnv& worker) {
  if (worker.world_size <= 1 && cfg.dist.backend != dist::Backend::kNccl) return std::nullopt;
  dist::CommunicatorOptions options;
  options.master_addr = worker.master_addr;
  options.master_port = dist::store_port(worker, cfg.dist.master_port);
  options.listen_fd = worker.rank == 0 ? worker.store_fd : -1;
  options.rank = worker.rank;
  options.world_size = worker.world_size;
  options.agent_store = worker.agent_store;
  options.restart_count = worker.restart_count;
  options.timeout = std::chrono::seconds(cfg.dist.timeout_s);
  return dist::Rendezvous(options);
}

/// The process group of the job on its rendezvous, or null for one process.
std::shared_ptr<dist::Communicator> connect(const config::RunConfig& cfg, c10::Device device,
                                            const dist::DeviceInfo& devices,
                                            const dist::WorkerEnv& worker, int64_t local,
                                            std::optional<dist::Rendezvous> joined) {
  if (!joined) return nullptr;
  const dist::BackendChoice backend = dist::choose_backend(
      cfg.dist.backend, device.is_cuda(), local, devices.cuda_devices, devices.no_cuda_reason);
  if (!backend.note.empty() && worker.rank == 0) log::warn("dist", "{}", backend.note);
  dist::CommunicatorOptions options = joined->options();
  options.use_nccl = backend.nccl;
  options.device = device;
  return std::make_shared<dist::Communicator>(std::move(*joined), options);
}

/// Vocabulary and token caches. Rank 0 builds them first (with a fine-tuning source's
/// vocabulary installed); the others wait, then only load them.
data::PreparedData prepare_rank_data(const config::RunConfig& cfg, const dist::WorkerEnv& worker,
                                     dist::Communicator* communicator,
                                     const std::optional<LoadedCheckpoint>& init, int threads) {
  if (communicator && worker.rank != 0) communicator->barrier();
  if (init && worker.rank == 0) install_init_vocabulary(*init, cfg);
  data::PreparedData data =
      data::prepare_data(cfg.data, cfg.run_dir, {threads, static_cast<uint64_t>(cfg.train.seed)});
  if (communicator && worker.rank == 0) communicator->barrier();
  return data;
}

/// Where this rank runs, made once: the rendezvous (which counts the ranks on this host),
/// threads, device and process group. Also returns the worker as the rendezvous completed it,
/// the workers on this node and the threads.
struct Placement {
  train::RankContext context;
  dist::WorkerEnv worker;
  int64_t local = 1;  ///< workers on this node
  int threads = 1;    ///< intra-op threads
};

Placement place_rank(const config::RunConfig& c, const dist::DeviceInfo& devices,
                     const dist::WorkerEnv& worker_env) {
  Placement p;
  std::optional<dist::Rendezvous> joined = join(c, worker_env);
  p.worker = joined ? with_host_ranks(worker_env, joined->host_ranks()) : worker_env;
  p.local = local_workers(c, devices, p.worker);
  p.threads = set_up_threads(c, devices, p.local, p.worker);
  train::RankContext& context = p.context;
  context.rank = p.worker.rank;
  context.world_size = p.worker.world_size;
  context.device = set_up_device(c, devices, p.worker, p.threads);
  context.communicator = connect(c, context.device, devices, p.worker, p.local, std::move(joined));
  if (context.device.is_cuda())
    context.ranks_on_device =
        dist::ranks_on_device(p.worker.local_rank, p.local, devices.cuda_devices);
  return p;
}

/// The settings of `c` run in `precision` with batches of `max_tokens`, without the config's
/// text and hash.
train::RunSettings settings_of(const config::RunConfig& c, amp::AmpMode precision,
                               int64_t max_tokens) {
  train::RunSettings s;
  s.model = c.model;
  s.data = c.data;
  s.train = c.train;
  s.amp = c.amp;
  s.checkpoint = c.checkpoint;
  s.dist = c.dist;
  s.run_dir = c.run_dir;
  s.max_tokens = max_tokens;
  s.precision = precision;
  // The copies in the options say the same, in a measuring setup too.
  s.data.max_tokens = max_tokens;
  s.amp.mode = precision;
  return s;
}

/// A setup on `context` to measure with while the autos are being settled: `c` with the
/// precision and budget settled so far. Its hash is the unsettled config's (the probes' Updaters
/// check that the ranks agree on it); it has no YAML (nothing is saved).
train::RunSetup measuring_setup(const train::RankContext& context, const config::RunConfig& c,
                                amp::AmpMode precision, int64_t max_tokens) {
  train::RunSetup setup;
  static_cast<train::RankContext&>(setup) = context;
  static_cast<train::RunSettings&>(setup) = settings_of(c, precision, max_tokens);
  setup.config_hash = config::config_hash(c);
  return setup;
}

/// amp.mode settled: rank.amp (rank 0's choice) as it is or, when it awaits timing, every
/// rank times the model in fp32 and bf16 on `measuring` (train/amp_timing.h), rank 0's times
/// decide and every rank takes rank 0's decision (job/amp_agreement.h). Sets
/// measuring.precision.
void settle_precision(Rank& rank, train::RunSetup& measuring) {
  if (rank.amp.needs_timing) {
    rank.amp = settle_amp_choice(measuring.communicator.get(), rank.amp, [&] {
      rank.amp_timing = train::time_amp_modes(measuring, rank.data);
      return AmpTimes{rank.amp_timing->fp32_s, rank.amp_timing->bf16_s};
    });
    log::info("train", "precision: {} (amp.mode auto: {}; timed in {:.1f} s)",
              amp::mode_name(rank.amp.mode), rank.amp.reason, rank.amp_timing->seconds);
  }
  measuring.precision = rank.amp.mode;
  measuring.amp.mode = rank.amp.mode;
}

}  // namespace

dist::WorkerEnv with_host_ranks(dist::WorkerEnv worker, const dist::HostRanks& host) {
  if (worker.launcher == dist::Launcher::kNone) return worker;
  if (worker.local_world_size == 0) {
    worker.local_world_size = host.local_world_size;
    log::info("dist", "{} rank(s) on this host ({}), counted at the rendezvous: {} does not say",
              host.local_world_size, dist::this_host().describe(),
              dist::launcher_name(worker.launcher));
  }
  if (!worker.local_rank_set) {
    worker.local_rank = host.local_rank;
    worker.local_rank_set = true;
    log::info("dist", "local rank {} on this host, counted at the rendezvous", host.local_rank);
  }
  return worker;
}

int64_t local_workers(const config::RunConfig& c, const dist::DeviceInfo& devices,
                      const dist::WorkerEnv& worker) {
  if (worker.launcher != dist::Launcher::kNone && worker.local_world_size > 0)
    return worker.local_world_size;
  if (c.dist.nproc_per_node > 0) return c.dist.nproc_per_node;
  return devices.cuda_devices > 0 ? devices.cuda_devices : 1;
}

config::RunConfig settled_config(config::RunConfig config, amp::AmpMode precision,
                                 int64_t max_tokens) {
  config.amp.mode = precision;
  config.data.max_tokens = max_tokens;
  return config;
}

train::RunSettings run_settings(const config::RunConfig& settled) {
  NMT_CHECK(settled.amp.mode && settled.data.max_tokens, Error,
            "run_settings of a config with amp.mode or data.max_tokens unsettled");
  train::RunSettings s = settings_of(settled, *settled.amp.mode, *settled.data.max_tokens);
  s.config_yaml = config::to_yaml(settled, /*with_docs=*/false);
  s.config_hash = config::config_hash(settled);
  return s;
}

Rank set_up_rank(const config::TrainCommand& command, config::RunConfig cfg,
                 const config::ResumeFrom& resume, const dist::DeviceInfo& devices,
                 const dist::WorkerEnv& worker_env, std::optional<RunDirClaim> claimed) {
  Rank rank;
  // The run directory's lock first: a second run on it must not read or set aside anything
  // (job/run_dir_owner.h). One process stops at once; in a job, every rank learns rank 0's
  // outcome in its first gather below.
  const RunDirClaim claim = claimed ? std::move(*claimed) : claim_run_dir(cfg.run_dir, worker_env);
  if (worker_env.world_size <= 1) agree_on_run_dir_claim(nullptr, claim);
  rank.run_dir_lock = claim.lock;
  // The checkpoint resumed from contributes its config (below --set), so read it first; not
  // by a rank 0 that was refused the run directory (it stops after the rendezvous).
  ResumePoint point = claim.refusal.empty()
                          ? resume_point(command.sources, std::move(cfg), resume)
                          : ResumePoint{std::nullopt, std::move(cfg)};
  rank.resume = std::move(point.checkpoint);
  const config::RunConfig& c = point.config;
  const Placement placed = place_rank(c, devices, worker_env);
  dist::Communicator* communicator = placed.context.communicator.get();
  if (communicator) agree_on_run_dir_claim(communicator, claim);
  // The first collective: every rank takes rank 0's precision before anything depends on it.
  rank.amp = agree_amp(c.amp, devices, communicator);
  // Fine-tuning starts from another run's model and vocabulary; a resumed run has its own.
  if (!rank.resume) rank.init = load_init_checkpoint(c);
  rank.data = prepare_rank_data(c, placed.worker, communicator, rank.init, placed.threads);
  // Resolve: the timing first, as the max_tokens fit measures in the run's precision; the
  // ranks on this rank's GPU share its free memory in that fit. One planner for the timing
  // and the training: epoch 1 planned once (a new one only if the fit changes the budget).
  train::RunSetup measuring = measuring_setup(
      placed.context, c, rank.amp.mode,
      c.data.max_tokens.value_or(train::unmeasured_max_tokens(c.data)));
  measuring.planner = train::train_planner(measuring, rank.data);
  settle_precision(rank, measuring);
  train::MaxTokensChoice budget = train::choose_max_tokens(c.data.max_tokens, measuring, rank.data,
                                                           placed.context.ranks_on_device);
  rank.max_tokens_fit = std::move(budget.fit);
  // Then build, once.
  rank.config = settled_config(std::move(point.config), rank.amp.mode, budget.max_tokens);
  static_cast<train::RankContext&>(rank.setup) = placed.context;
  static_cast<train::RunSettings&>(rank.setup) = run_settings(rank.config);
  rank.setup.planner = measuring.planner;
  rank.setup.planner = train::train_planner(rank.setup, rank.data);
  return rank;
}

}  // namespace nmt::job
