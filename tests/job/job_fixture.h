#pragma once
// The job tests' fixture: a tiny config on the first 1000 pairs of the shipped corpus, one CPU
// rank's devices, and set_up_rank of it.
#include "catch_torch.h"

#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_file.h"
#include "checkpoint/run_metadata.h"
#include "config/run_config.h"
#include "data/data_fixture.h"
#include "job/rank_setup.h"
#include "util/cpu_features.h"

namespace nmt::test {

using nmt::config::ResumeFrom;
using nmt::config::RunConfig;

/// A tiny config on the first 1000 pairs of the shipped corpus, its run directory in `dir`.
struct TinyRun {
  nmt::test::TempDir dir;
  nmt::config::TrainCommand command;

  explicit TinyRun(std::vector<std::string> overrides = {}) {
    const std::string src = nmt::test::head_of(dir, "ddtp.en-de.train.en.gz", "train.en", 1000);
    const std::string tgt = nmt::test::head_of(dir, "ddtp.en-de.train.de.gz", "train.de", 1000);
    command.sources.file = dir.write("tiny.yaml", "run_dir: " + (dir.path() / "run").string() +
        "\nmodel:\n  encoder_layers: 1\n  decoder_layers: 1\n  d_model: 16\n  heads: 2\n"
        "  ffn_dim: 32\n  max_positions: 128\n"
        "data:\n  train_src: " + src + "\n  train_tgt: " + tgt + "\n  vocab_size: 300\n"
        "  max_len: 100\n  max_tokens: 2000\n"
        "train:\n  threads: 1\n  cache_host_memory: false\n");
    command.sources.overrides = std::move(overrides);
  }
  RunConfig config() const { return nmt::config::load_run_config(command.sources); }
  std::filesystem::path checkpoints() const { return dir.path() / "run" / "checkpoints"; }

  /// Writes a resumable checkpoint of `config` at `step` (a stand-in tensor, real metadata).
  std::filesystem::path save_checkpoint(const RunConfig& config, int64_t step) const {
    nmt::checkpoint::RunMetadata meta;
    meta.step = step;
    meta.epoch = 1;
    meta.config = nmt::config::to_yaml(config, /*with_docs=*/false);
    meta.config_hash = nmt::config::config_hash(config);
    meta.vocab_fingerprint = "test";
    nmt::checkpoint::CheckpointData data;
    data.tensors.emplace_back("model.stand_in", at::ones({2}));
    data.metadata = meta.to_map();
    return nmt::checkpoint::CheckpointDir(checkpoints(), config.checkpoint).save(step, data);
  }
};

inline nmt::dist::DeviceInfo one_cpu() {
  nmt::dist::DeviceInfo devices;
  devices.cpu_cores = 2;
  devices.no_cuda_reason = "test";
  devices.cpu = nmt::detect_cpu_features();  // this machine's, as probe_devices reads them
  return devices;
}

inline nmt::job::Rank set_up(const TinyRun& run, ResumeFrom::Mode mode = ResumeFrom::Mode::kNone) {
  return nmt::job::set_up_rank(run.command, run.config(), {mode, {}}, one_cpu(),
                               nmt::dist::WorkerEnv{});
}

}  // namespace nmt::test
