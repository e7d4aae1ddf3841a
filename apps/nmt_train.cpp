// nmt-train: parse the command line, load and validate the config, then run.
// Until the training loop lands (issue 4) a run prints the effective plan and stops.
#include <cstdio>
#include <iostream>

#include "config/run_config.h"
#include "config/train_cli.h"
#include "dist/device.h"
#include "dist/worker_env.h"
#include "util/log.h"
#include "util/main_guard.h"

namespace {

using namespace nmt;

/// Logs what this invocation would run: devices, workers, data and model shape.
void log_plan(const config::RunConfig& c, const dist::DeviceInfo& devices,
              const dist::WorkerEnv& worker) {
  log::info("plan", "LibTorch {}{}", devices.torch_version,
            devices.cuda_compiled ? fmt::format(" (CUDA {} build, NCCL {})", devices.cuda_version,
                                                devices.nccl_version)
                                  : std::string(" (CPU build)"));
  for (const std::string& name : devices.device_names) log::info("plan", "GPU: {}", name);
  const bool gpu = devices.cuda_devices > 0;
  int64_t workers = c.dist.nproc_per_node;
  if (workers == 0) workers = gpu ? devices.cuda_devices : 1;
  if (!gpu) log::info("plan", "{}: {} CPU worker(s), Gloo", devices.no_cuda_reason, workers);
  else log::info("plan", "{} worker(s), one per GPU, NCCL", workers);
  if (worker.launcher != "none") {
    log::info("plan", "started by {} as rank {} of {} (local rank {})", worker.launcher,
              worker.rank, worker.world_size, worker.local_rank);
  }
  log::info("plan", "run directory {}; config hash {}", c.run_dir, config::config_hash(c));
  log::info("plan", "model: {}+{} layers, d_model {}, {} heads, ffn {}", c.model.encoder_layers,
            c.model.decoder_layers, c.model.d_model, c.model.heads, c.model.ffn_dim);
  log::info("plan", "data: {} / {}; {} padded tokens per batch per rank, update_freq {}",
            c.data.train_src, c.data.train_tgt, c.data.max_tokens, c.data.update_freq);
  log::warn("plan", "this build has no training loop yet (it arrives with the training-loop "
                    "issue); stopping after the plan");
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
  log_plan(cfg, dist::probe_devices(), worker);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return nmt::run_main("nmt-train", [&] { return run(argc, argv); });
}
