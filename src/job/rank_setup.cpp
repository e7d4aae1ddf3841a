#include "job/rank_setup.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/Parallel.h>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/run_metadata.h"
#include "dist/host_allocator.h"
#include "dist/process_group.h"
#include "dist/rendezvous.h"
#include "job/amp_agreement.h"
#include "job/run_dir_owner.h"
#include "train/amp_timing.h"
#include "train/metrics_log.h"
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

/// The effective config as the RunSetup keeps it: its YAML (stored in every checkpoint) and
/// hash (which the ranks check they agree on).
void stamp_config(train::RunSetup& setup, const config::RunConfig& c) {
  setup.data = c.data;
  setup.config_yaml = config::to_yaml(c, /*with_docs=*/false);
  setup.config_hash = config::config_hash(c);
}

train::RunSetup make_run_setup(const config::RunConfig& c, const dist::WorkerEnv& worker,
                               c10::Device device,
                               std::shared_ptr<dist::Communicator> communicator) {
  train::RunSetup setup;
  setup.model = c.model;
  setup.train = c.train;
  setup.amp = c.amp;
  setup.checkpoint = c.checkpoint;
  setup.dist = c.dist;
  setup.run_dir = c.run_dir;
  stamp_config(setup, c);
  // Until resolve_max_tokens: the budget that auto stands for where nothing is measured.
  setup.max_tokens = c.data.max_tokens.value_or(train::unmeasured_max_tokens(c.data));
  setup.rank = worker.rank;
  setup.world_size = worker.world_size;
  setup.device = device;
  setup.communicator = std::move(communicator);
  return setup;
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

std::optional<LoadedCheckpoint> find_resume_checkpoint(const config::RunConfig& config,
                                                       const config::ResumeFrom& from) {
  using Mode = config::ResumeFrom::Mode;
  switch (from.mode) {
    case Mode::kNone:
      return std::nullopt;
    case Mode::kPath:
      return LoadedCheckpoint{from.path, checkpoint::load_checkpoint(from.path)};
    case Mode::kAuto:
      break;
  }
  // A checkpoint of another model (one copied in, or a config changed since) is passed over
  // for an older one that fits.
  const auto other_model = [&config](const checkpoint::CheckpointData& data) {
    const checkpoint::RunMetadata meta =
        checkpoint::RunMetadata::parse_resumable(data.metadata, data.source.string());
    return config::model_difference(config, config::parse_stored_config(meta.config, "checkpoint"));
  };
  auto newest = checkpoint::CheckpointDir(std::filesystem::path(config.run_dir) / "checkpoints",
                                          config.checkpoint)
                    .load_newest_valid(other_model);
  if (!newest) return std::nullopt;
  return LoadedCheckpoint{std::move(newest->first), std::move(newest->second)};
}

namespace {

/// The step a run of `from` starts at: 0 for none, the checkpoint's for a file (from its
/// metadata, else its name); nullopt for auto, or a file that is gone and unnamed.
std::optional<int64_t> start_step(const config::ResumeFrom& from) {
  using Mode = config::ResumeFrom::Mode;
  if (from.mode == Mode::kNone) return 0;
  if (from.mode == Mode::kAuto) return std::nullopt;
  try {
    return checkpoint::RunMetadata::parse(checkpoint::read_checkpoint_metadata(from.path),
                                          from.path)
        .step;
  } catch (const Error&) {
    return checkpoint::step_of_checkpoint_file(from.path);  // deleted since, e.g. by retention
  }
}

checkpoint::CheckpointDir checkpoint_dir(const config::RunConfig& config) {
  return checkpoint::CheckpointDir(std::filesystem::path(config.run_dir) / "checkpoints",
                                   config.checkpoint);
}

}  // namespace

config::ResumeFrom resume_after_restart(const config::RunConfig& config,
                                        const config::ResumeFrom& given) {
  using Mode = config::ResumeFrom::Mode;
  if (given.mode == Mode::kAuto) return given;
  const std::optional<int64_t> started_at = start_step(given);
  for (const auto& file : checkpoint_dir(config).list()) {  // newest first
    if (started_at && *checkpoint::step_of_checkpoint_file(file) <= *started_at) break;
    try {
      checkpoint::read_checkpoint_metadata(file);
    } catch (const Error&) {
      continue;  // damaged: an older save of the job's
    }
    // Named, so that it loads as --resume PATH does: auto would check it against the YAML's
    // model, not the run's.
    return {Mode::kPath, file.string()};
  }
  return given;
}

std::optional<std::filesystem::path> set_aside_replaced_checkpoints(
    const config::RunConfig& config, const config::ResumeFrom& from) {
  const std::optional<int64_t> step = start_step(from);
  if (!step) return std::nullopt;
  const auto folder = checkpoint_dir(config).set_aside_after(*step);
  if (folder) train::set_aside_records_after(config.run_dir, *step, *folder);
  return folder;
}

namespace {

/// `sources` read again with a checkpoint's config between the file and --set.
config::RunConfig with_checkpoint_config(const config::ConfigSources& sources,
                                         const std::filesystem::path& file,
                                         const std::map<std::string, std::string>& metadata) {
  config::ConfigSources with_checkpoint = sources;
  with_checkpoint.checkpoint_name = file.string();
  with_checkpoint.checkpoint_yaml =
      checkpoint::RunMetadata::parse(metadata, with_checkpoint.checkpoint_name).config;
  return config::load_run_config(with_checkpoint);
}

}  // namespace

config::RunConfig config_to_resume(const config::ConfigSources& sources,
                                   const config::RunConfig& config,
                                   const config::ResumeFrom& from) {
  using Mode = config::ResumeFrom::Mode;
  std::vector<std::filesystem::path> candidates;
  if (from.mode == Mode::kPath) {
    candidates.emplace_back(from.path);
  } else if (from.mode == Mode::kAuto) {
    try {
      candidates = checkpoint_dir(config).list();
    } catch (const Error&) {
      return config;  // an unreadable folder: the workers say so
    }
  }
  for (const auto& file : candidates) {
    try {
      return with_checkpoint_config(sources, file, checkpoint::read_checkpoint_metadata(file));
    } catch (const Error&) {
      // A damaged file, or a config that no longer loads: the workers pass over it or stop,
      // naming it.
    }
  }
  return config;
}

bool restart_best_record_if_ranked_otherwise(LoadedCheckpoint& resume,
                                             const config::RunConfig& config) {
  auto& metadata = resume.data.metadata;
  const std::string name = resume.path.string();
  const config::RunConfig saved =
      config::parse_stored_config(checkpoint::RunMetadata::parse(metadata, name).config, name);
  const train::TrainOptions &was = saved.train, &now = config.train;
  if (was.best_metric == now.best_metric && was.best_set == now.best_set) return false;
  const bool had_best = metadata.erase(std::string(checkpoint::meta_key::kBestSelection)) > 0;
  metadata.erase(std::string(checkpoint::meta_key::kWithoutImprovement));
  const auto ranking = [](const train::TrainOptions& t) {
    const char* metric = t.best_metric == train::BestMetric::kBleu   ? "bleu"
                         : t.best_metric == train::BestMetric::kChrf ? "chrf"
                                                                     : "loss";
    return t.best_set.empty() ? fmt::format("{} of the first validation set", metric)
                              : fmt::format("{} of validation set '{}'", metric, t.best_set);
  };
  log::warn("train",
            "{}: its run ranked checkpoints by {} (train.best_metric, best_set), this one by {}: "
            "the best so far and the patience count start over{} (checkpoints already saved "
            "keep their own selection, which keep_best and nmt-translate -c RUN_DIR compare)",
            name, ranking(was), ranking(now), had_best ? "" : " (it had none yet)");
  return true;
}

config::RunConfig resumed_config(const config::ConfigSources& sources, config::RunConfig config,
                                 const std::optional<LoadedCheckpoint>& resume) {
  if (!resume) return config;
  return with_checkpoint_config(sources, resume->path, resume->data.metadata);
}

amp::AmpHardware amp_hardware(const dist::DeviceInfo& devices) {
  amp::AmpHardware hardware;
  hardware.cuda = devices.cuda_devices > 0;
  if (hardware.cuda && !devices.cuda_capabilities.empty())
    hardware.min_cuda_capability =
        *std::min_element(devices.cuda_capabilities.begin(), devices.cuda_capabilities.end());
  if (!hardware.cuda) hardware.cpu = devices.cpu;
  return hardware;
}

amp::AmpChoice resolve_amp(config::RunConfig& config, const dist::DeviceInfo& devices) {
  amp::AmpChoice choice = amp::resolve_amp_mode(
      config.amp.mode, config.amp.mode ? amp::AmpHardware{} : amp_hardware(devices));
  // A choice that awaits timing leaves amp.mode auto until time_amp below settles it.
  if (!choice.needs_timing) config.amp.mode = choice.mode;
  return choice;
}

amp::AmpChoice agree_amp(config::RunConfig& config, const dist::DeviceInfo& devices,
                         dist::Communicator* communicator) {
  config::RunConfig mine = config;
  const amp::AmpChoice choice = agree_amp_choice(communicator, resolve_amp(mine, devices));
  if (!choice.needs_timing) {
    config.amp.mode = choice.mode;
    log::info("train", "precision: {} ({}{})", amp::mode_name(choice.mode),
              choice.automatic ? "amp.mode auto: " : "", choice.reason);
  }
  return choice;
}

void time_amp(Rank& rank) {
  if (!rank.amp.needs_timing) return;
  rank.amp = settle_amp_choice(rank.setup.communicator.get(), rank.amp, [&rank] {
    rank.amp_timing = train::time_amp_modes(rank.setup, rank.data);
    return AmpTimes{rank.amp_timing->fp32_s, rank.amp_timing->bf16_s};
  });
  log::info("train", "precision: {} (amp.mode auto: {}; timed in {:.1f} s)",
            amp::mode_name(rank.amp.mode), rank.amp.reason, rank.amp_timing->seconds);
  rank.config.amp.mode = rank.amp.mode;
  rank.setup.amp.mode = rank.amp.mode;
  stamp_config(rank.setup, rank.config);
}

void resolve_max_tokens(Rank& rank, int64_t ranks_per_device) {
  train::MaxTokensChoice choice = train::choose_max_tokens(rank.setup, rank.data, ranks_per_device);
  rank.setup.max_tokens = choice.max_tokens;
  rank.max_tokens_fit = std::move(choice.fit);
  if (rank.config.data.max_tokens == choice.max_tokens) return;  // a number already
  rank.config.data.max_tokens = choice.max_tokens;
  stamp_config(rank.setup, rank.config);
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
  if (claim.refusal.empty()) rank.resume = find_resume_checkpoint(cfg, resume);
  rank.config = resumed_config(command.sources, std::move(cfg), rank.resume);
  if (rank.resume) restart_best_record_if_ranked_otherwise(*rank.resume, rank.config);
  const config::RunConfig& c = rank.config;
  std::optional<dist::Rendezvous> joined = join(c, worker_env);
  const dist::WorkerEnv worker =
      joined ? with_host_ranks(worker_env, joined->host_ranks()) : worker_env;
  const int64_t local = local_workers(c, devices, worker);
  const int threads = set_up_threads(c, devices, local, worker);
  const c10::Device device = set_up_device(c, devices, worker, threads);
  std::shared_ptr<dist::Communicator> communicator =
      connect(c, device, devices, worker, local, std::move(joined));
  if (communicator) agree_on_run_dir_claim(communicator.get(), claim);
  // The first collective: every rank takes rank 0's precision before anything depends on it.
  rank.amp = agree_amp(rank.config, devices, communicator.get());
  // Fine-tuning starts from another run's model and vocabulary; a resumed run has its own.
  if (!rank.resume) rank.init = load_init_checkpoint(c);
  rank.data = prepare_rank_data(c, worker, communicator.get(), rank.init, threads);
  rank.setup = make_run_setup(c, worker, device, std::move(communicator));
  if (device.is_cuda())
    rank.setup.ranks_on_device =
        dist::ranks_on_device(worker.local_rank, local, devices.cuda_devices);
  // One planner for the timing and the training: epoch 1 planned once (a new one only if
  // the max_tokens fit changes the budget).
  rank.setup.planner = train::train_planner(rank.setup, rank.data);
  time_amp(rank);  // before the max_tokens fit, which measures in the run's precision
  // The ranks on this rank's GPU share its free memory in the max_tokens auto fit.
  resolve_max_tokens(rank, rank.setup.ranks_on_device);
  rank.setup.planner = train::train_planner(rank.setup, rank.data);
  return rank;
}

}  // namespace nmt::job
