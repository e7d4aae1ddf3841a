// job/rank_setup: one CPU rank of a tiny config, set up directly: the checkpoint it resumes
// from, the config that follows, the data, and data.max_tokens resolved to a number.
#include "catch_torch.h"

#include <ATen/Parallel.h>

#include <string>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_file.h"
#include "checkpoint/run_metadata.h"
#include "config/run_config.h"
#include "data/batch_plan.h"
#include "data/data_fixture.h"
#include "job/rank_setup.h"
#include "train/trainer.h"
#include "util/cpu_features.h"
#include "util/error.h"

using nmt::config::ResumeFrom;
using nmt::config::RunConfig;
using nmt::job::Rank;
using nmt::test::TempDir;

namespace {

/// A tiny config on the first 1000 pairs of the shipped corpus, its run directory in `dir`.
struct TinyRun {
  TempDir dir;
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

nmt::dist::DeviceInfo one_cpu() {
  nmt::dist::DeviceInfo devices;
  devices.cpu_cores = 2;
  devices.no_cuda_reason = "test";
  devices.cpu = nmt::detect_cpu_features();  // this machine's, as probe_devices reads them
  return devices;
}

Rank set_up(const TinyRun& run, ResumeFrom::Mode mode = ResumeFrom::Mode::kNone) {
  return nmt::job::set_up_rank(run.command, run.config(), {mode, {}}, one_cpu(),
                               nmt::dist::WorkerEnv{});
}

}  // namespace

TEST_CASE("rank setup: workers per node and ranks per GPU", "[job]") {
  nmt::dist::DeviceInfo gpus = one_cpu();
  gpus.cuda_devices = 2;
  // The ranks sharing a GPU (what the auto fit divides its free memory by): dist's count.
  CHECK(nmt::dist::ranks_on_device(0, 4, gpus.cuda_devices) == 2);
  CHECK(nmt::dist::ranks_on_device(0, 3, gpus.cuda_devices) == 2);
  CHECK(nmt::dist::ranks_on_device(1, 3, gpus.cuda_devices) == 1);
  CHECK(nmt::dist::ranks_on_device(0, 1, gpus.cuda_devices) == 1);
  CHECK(nmt::dist::ranks_on_device(0, 4, one_cpu().cuda_devices) == 1);
  const TinyRun run;
  RunConfig c = run.config();
  nmt::dist::WorkerEnv alone;
  alone.local_world_size = 0;
  CHECK(nmt::job::local_workers(c, gpus, alone) == 2);  // one per GPU
  CHECK(nmt::job::local_workers(c, one_cpu(), alone) == 1);
  c.dist.nproc_per_node = 3;
  CHECK(nmt::job::local_workers(c, gpus, alone) == 3);
  nmt::dist::WorkerEnv launched;
  launched.launcher = nmt::dist::Launcher::kTorchrun;
  launched.local_world_size = 5;
  CHECK(nmt::job::local_workers(c, gpus, launched) == 5);
}

TEST_CASE("rank setup: a launcher's silence on the host's ranks is filled in from the "
          "rendezvous", "[job]") {
  nmt::dist::DeviceInfo gpu = one_cpu();
  gpu.cuda_devices = 1;
  const RunConfig c = TinyRun().config();
  // RANK, WORLD_SIZE and LOCAL_RANK by hand, no LOCAL_WORLD_SIZE: 2 ranks, both on this host.
  nmt::dist::WorkerEnv silent;
  silent.launcher = nmt::dist::Launcher::kTorchrun;
  silent.rank = 1;
  silent.world_size = 2;
  silent.local_rank = 1;
  silent.local_world_size = 0;
  const nmt::dist::HostRanks counted{1, 2};
  const nmt::dist::WorkerEnv filled = nmt::job::with_host_ranks(silent, counted);
  CHECK(filled.local_world_size == 2);
  CHECK(filled.local_rank == 1);
  // Both ranks share the one GPU: not one worker per GPU, which gave NCCL "Duplicate GPU".
  CHECK(nmt::job::local_workers(c, gpu, filled) == 2);
  CHECK(nmt::dist::choose_backend(nmt::dist::Backend::kAuto, true, 2, 1, "").nccl == false);
  // Without LOCAL_RANK either (PMI without MPI_LOCALRANKID), the rank's place comes too.
  nmt::dist::WorkerEnv no_local_rank = silent;
  no_local_rank.local_rank = 0;
  no_local_rank.local_rank_set = false;
  CHECK(nmt::job::with_host_ranks(no_local_rank, counted).local_rank == 1);
  // What the launcher says stands.
  nmt::dist::WorkerEnv said = silent;
  said.local_world_size = 4;
  CHECK(nmt::job::with_host_ranks(said, counted).local_world_size == 4);
  // A process no launcher started is left as it is.
  nmt::dist::WorkerEnv alone;
  alone.local_world_size = 0;
  CHECK(nmt::job::with_host_ranks(alone, counted).local_world_size == 0);
}

TEST_CASE("rank setup: one CPU rank gets its threads, data and the configured max_tokens",
          "[job]") {
  const TinyRun run;
  const Rank rank = set_up(run);
  CHECK(at::get_num_threads() == 1);
  CHECK(rank.setup.device == c10::Device(c10::kCPU));
  CHECK(rank.setup.communicator == nullptr);
  CHECK(rank.setup.world_size == 1);
  CHECK(rank.data.train.size() > 800);  // of 1000 pairs, a few filtered
  CHECK(rank.data.vocab.src.size() == 300);
  CHECK(rank.setup.max_tokens == 2000);
  CHECK(rank.config.data.max_tokens == 2000);
  CHECK_FALSE(rank.max_tokens_fit.has_value());
  CHECK_FALSE(rank.resume.has_value());
  CHECK_FALSE(rank.init.has_value());
  CHECK(rank.setup.config_yaml == nmt::config::to_yaml(rank.config, /*with_docs=*/false));
  CHECK(rank.setup.config_hash == nmt::config::config_hash(rank.config));
}

TEST_CASE("rank setup: max_tokens auto becomes a number in the setup, the config, its YAML and "
          "hash", "[job]") {
  const TinyRun run({"data.max_tokens=auto"});
  const RunConfig as_given = run.config();
  REQUIRE_FALSE(as_given.data.max_tokens.has_value());
  const Rank rank = set_up(run);
  // On CPU without data.auto_memory_mb nothing is measured: the unmeasured budget.
  const int64_t budget = nmt::train::unmeasured_max_tokens(as_given.data);
  REQUIRE(rank.max_tokens_fit.has_value());
  CHECK_FALSE(rank.max_tokens_fit->fallback.empty());
  CHECK(rank.setup.max_tokens == budget);
  CHECK(rank.config.data.max_tokens == budget);
  CHECK(rank.setup.data.max_tokens == budget);
  CHECK(rank.setup.config_yaml.find("max_tokens: " + std::to_string(budget)) != std::string::npos);
  CHECK(rank.setup.config_hash == nmt::config::config_hash(rank.config));
  CHECK(rank.setup.config_hash != nmt::config::config_hash(as_given));
}

TEST_CASE("rank setup: the checkpoint to resume is none, the newest of this model, or the "
          "given file", "[job]") {
  const TinyRun run;
  const RunConfig config = run.config();
  const ResumeFrom auto_resume{ResumeFrom::Mode::kAuto, {}};
  CHECK_FALSE(nmt::job::find_resume_checkpoint(config, auto_resume).has_value());  // none yet
  RunConfig other_model = config;
  other_model.model.d_model = 32;
  const auto ours = run.save_checkpoint(config, 10);
  const auto theirs = run.save_checkpoint(other_model, 20);
  const auto found = nmt::job::find_resume_checkpoint(config, auto_resume);
  REQUIRE(found.has_value());
  CHECK(found->path == ours);  // the newer file is of another model: passed over
  CHECK(found->data.metadata.at("step") == "10");
  CHECK_FALSE(nmt::job::find_resume_checkpoint(config, {ResumeFrom::Mode::kNone, {}}));
  const auto given =
      nmt::job::find_resume_checkpoint(config, {ResumeFrom::Mode::kPath, theirs.string()});
  REQUIRE(given.has_value());
  CHECK(given->path == theirs);
  CHECK_THROWS_AS(nmt::job::find_resume_checkpoint(
                      config, {ResumeFrom::Mode::kPath, (run.dir.path() / "missing").string()}),
                  nmt::CheckpointError);
  std::filesystem::remove(ours);  // only another model's checkpoint left: an error, not fresh
  CHECK_THROWS_AS(nmt::job::find_resume_checkpoint(config, auto_resume), nmt::CheckpointError);
}

TEST_CASE("rank setup: a restarted worker resumes from the job's newest checkpoint", "[job]") {
  // With --resume PATH, every restart (--max-restarts) went back to PATH: the updates since
  // were lost and trained again, each time.
  const TinyRun run;
  const RunConfig config = run.config();
  using Mode = ResumeFrom::Mode;
  const auto started = run.save_checkpoint(config, 10);
  const ResumeFrom from_path{Mode::kPath, started.string()};
  // Nothing saved since the start: the same start.
  CHECK(nmt::job::resume_after_restart(config, from_path).path == started.string());
  CHECK(nmt::job::resume_after_restart(config, {Mode::kAuto, {}}).mode == Mode::kAuto);
  const auto newer = run.save_checkpoint(config, 20);
  // The job's newest, named as a file (auto would check it against the YAML's model).
  const ResumeFrom restart = nmt::job::resume_after_restart(config, from_path);
  CHECK(restart.mode == Mode::kPath);
  CHECK(restart.path == newer.string());
  CHECK(nmt::job::resume_after_restart(config, {Mode::kNone, {}}).path == newer.string());
  // PATH deleted since by retention: its step is read from its name; the restart still works.
  std::filesystem::remove(started);
  CHECK(nmt::job::resume_after_restart(config, from_path).path == newer.string());
  // A damaged newest save is passed over for an older one of the job's.
  const auto damaged = run.save_checkpoint(config, 30);
  std::filesystem::resize_file(damaged, 10);
  CHECK(nmt::job::resume_after_restart(config, from_path).path == newer.string());
  // A start later than anything in run_dir (a file from elsewhere) stays the start.
  const TinyRun elsewhere;
  const auto later = elsewhere.save_checkpoint(config, 40);
  CHECK(nmt::job::resume_after_restart(config, {Mode::kPath, later.string()}).path ==
        later.string());
  // No checkpoint at all: --resume none stays none.
  const TinyRun empty;
  CHECK(nmt::job::resume_after_restart(empty.config(), {Mode::kNone, {}}).mode == Mode::kNone);
}

TEST_CASE("rank setup: before a job starts the replaced run's later checkpoints are set aside",
          "[job]") {
  // Moved only when training began: a first attempt that failed in its setup left them, and
  // its restart resumed the replaced run's newest.
  using Mode = ResumeFrom::Mode;
  const TinyRun run;
  const RunConfig config = run.config();
  const auto ten = run.save_checkpoint(config, 10);
  run.save_checkpoint(config, 20);
  run.save_checkpoint(config, 30);
  CHECK_FALSE(nmt::job::set_aside_replaced_checkpoints(config, {Mode::kAuto, {}}));
  const auto folder = nmt::job::set_aside_replaced_checkpoints(config, {Mode::kPath, ten.string()});
  REQUIRE(folder);
  CHECK(std::filesystem::exists(*folder / "checkpoint-00000020.safetensors"));
  CHECK(std::filesystem::exists(*folder / "checkpoint-00000030.safetensors"));
  CHECK(nmt::checkpoint::CheckpointDir(run.checkpoints(), config.checkpoint).list() ==
        std::vector<std::filesystem::path>{ten});
  const auto all = nmt::job::set_aside_replaced_checkpoints(config, {Mode::kNone, {}});
  REQUIRE(all);
  CHECK(std::filesystem::exists(*all / "checkpoint-00000010.safetensors"));
}

TEST_CASE("rank setup: the launcher counts workers from the config the resumed run will have",
          "[job]") {
  // The launcher decided from the YAML and flags alone: a run started with --nproc-per-node 2
  // and run again without the flag went on as 1 rank (half the global batch).
  using Mode = ResumeFrom::Mode;
  const TinyRun run;
  RunConfig two_workers = run.config();
  two_workers.dist.nproc_per_node = 2;
  CHECK(nmt::job::config_to_resume(run.command.sources, run.config(), {Mode::kAuto, {}})
            .dist.nproc_per_node == 0);  // nothing to resume: the YAML's
  const auto saved = run.save_checkpoint(two_workers, 10);
  CHECK(nmt::job::config_to_resume(run.command.sources, run.config(), {Mode::kAuto, {}})
            .dist.nproc_per_node == 2);
  CHECK(nmt::job::config_to_resume(run.command.sources, run.config(), {Mode::kPath, saved.string()})
            .dist.nproc_per_node == 2);
  CHECK(nmt::job::config_to_resume(run.command.sources, run.config(), {Mode::kNone, {}})
            .dist.nproc_per_node == 0);
  // --set (--nproc-per-node) still wins over the checkpoint.
  nmt::config::ConfigSources with_flag = run.command.sources;
  with_flag.overrides.push_back("dist.nproc_per_node=1");
  CHECK(
      nmt::job::config_to_resume(with_flag, run.config(), {Mode::kAuto, {}}).dist.nproc_per_node ==
      1);
  // A file whose metadata does not read leaves the config as it is (the workers say why).
  CHECK(nmt::job::config_to_resume(run.command.sources, run.config(),
                                   {Mode::kPath, (run.dir.path() / "missing").string()})
            .dist.nproc_per_node == 0);
}

TEST_CASE("rank setup: a resume that ranks checkpoints otherwise starts the best record over",
          "[job]") {
  // Kept, a best of minus BLEU (say -25) compared with losses would never be beaten: patience
  // stopped the run and keep_best kept the old files.
  const TinyRun run;
  const RunConfig config = run.config();
  const auto file = run.save_checkpoint(config, 10);
  nmt::job::LoadedCheckpoint resume{file, nmt::checkpoint::load_checkpoint(file)};
  resume.data.metadata["best_selection"] = "-25";
  resume.data.metadata["validations_without_improvement"] = "3";
  CHECK_FALSE(nmt::job::restart_best_record_if_ranked_otherwise(resume, config));
  CHECK(resume.data.metadata.count("best_selection") == 1);
  RunConfig by_bleu = config;
  by_bleu.train.best_metric = nmt::train::BestMetric::kBleu;
  CHECK(nmt::job::restart_best_record_if_ranked_otherwise(resume, by_bleu));
  CHECK(resume.data.metadata.count("best_selection") == 0);
  CHECK(resume.data.metadata.count("validations_without_improvement") == 0);
  const auto meta = nmt::checkpoint::RunMetadata::parse(resume.data.metadata, file.string());
  CHECK_FALSE(meta.best_selection);
  CHECK(meta.validations_without_improvement == 0);
  RunConfig other_set = config;
  other_set.train.best_set = "news";
  resume.data.metadata["best_selection"] = "1.5";
  CHECK(nmt::job::restart_best_record_if_ranked_otherwise(resume, other_set));
  CHECK(resume.data.metadata.count("best_selection") == 0);
}

TEST_CASE("rank setup: a resumed run's config has the checkpoint's between the file and --set",
          "[job]") {
  const TinyRun run({"train.seed=7"});
  RunConfig saved = run.config();
  saved.train.lr = 0.125;
  saved.train.seed = 3;
  saved.data.max_tokens = 3000;
  const auto file = run.save_checkpoint(saved, 10);
  CHECK(nmt::job::resumed_config(run.command.sources, run.config(), std::nullopt).train.lr ==
        run.config().train.lr);
  const auto resume = nmt::job::find_resume_checkpoint(run.config(), {ResumeFrom::Mode::kAuto, {}});
  REQUIRE(resume.has_value());
  const RunConfig resumed = nmt::job::resumed_config(run.command.sources, run.config(), resume);
  CHECK(resumed.train.lr == 0.125);           // the checkpoint's, over the file's default
  CHECK(resumed.data.max_tokens == 3000);     // the checkpoint's, over the file's 2000
  CHECK(resumed.train.seed == 7);             // --set wins over the checkpoint
  // set_up_rank does the same, and plans with the checkpoint's budget.
  const Rank rank = set_up(run, ResumeFrom::Mode::kAuto);
  REQUIRE(rank.resume.has_value());
  CHECK(rank.resume->path == file);
  CHECK(rank.config.train.lr == 0.125);
  CHECK(rank.setup.max_tokens == 3000);
}

TEST_CASE("rank setup: amp.mode auto is resolved once and stored in the config", "[job]") {
  TinyRun run;  // its config names no amp.mode: auto
  REQUIRE_FALSE(run.config().amp.mode.has_value());
  const Rank rank = set_up(run);
  REQUIRE(rank.config.amp.mode.has_value());
  CHECK(rank.amp.automatic);
  CHECK_FALSE(rank.amp.reason.empty());
  // This machine's CPU decides, by the rule of amp/amp_choice.h: with bf16 instructions by
  // timing the model on the corpus's batches; without them fp32, nothing timed.
  const auto pending = nmt::amp::choose_amp_mode(nmt::job::amp_hardware(one_cpu()));
  if (pending.needs_timing) {
    REQUIRE(rank.amp_timing.has_value());
    const nmt::train::AmpTiming& t = *rank.amp_timing;
    CHECK(t.fp32_s > 0);
    CHECK(t.bf16_s > 0);
    CHECK(t.fp32_steps.size() == t.bf16_steps.size());
    CHECK_FALSE(t.fp32_steps.empty());
    CHECK(t.padded_tokens > 0);
    CHECK(t.padded_tokens <= 2 * rank.setup.max_tokens * int64_t(t.fp32_steps.size()));
    CHECK(rank.amp.mode == nmt::amp::decide_by_timing(pending, t.fp32_s, t.bf16_s).mode);
    CHECK_THAT(rank.amp.reason, Catch::Matchers::Contains("s in bf16"));
  } else {
    CHECK_FALSE(rank.amp_timing.has_value());
    CHECK(rank.amp.mode == pending.mode);
  }
  CHECK_FALSE(rank.amp.needs_timing);
  CHECK(*rank.config.amp.mode == rank.amp.mode);
  CHECK(rank.setup.amp.mode == rank.amp.mode);
  // The stored config (what checkpoints hold) names the mode, so a resume keeps it.
  CHECK(rank.setup.config_yaml.find(std::string("mode: ") + nmt::amp::mode_name(rank.amp.mode)) !=
        std::string::npos);

  TinyRun named({"amp.mode=off"});
  const Rank kept = set_up(named);
  CHECK(kept.config.amp.mode == nmt::amp::AmpMode::kOff);
  CHECK_FALSE(kept.amp.automatic);
}

TEST_CASE("rank setup: amp auto reads the GPUs' compute capability, the lowest", "[job]") {
  nmt::dist::DeviceInfo gpus = one_cpu();
  gpus.cuda_devices = 2;
  gpus.cuda_capabilities = {90, 75};
  CHECK(nmt::job::amp_hardware(gpus).cuda);
  CHECK(nmt::job::amp_hardware(gpus).min_cuda_capability == 75);
  RunConfig config;
  config.amp.mode = std::nullopt;
  CHECK(nmt::job::resolve_amp(config, gpus).mode == nmt::amp::AmpMode::kOff);
  CHECK(config.amp.mode == nmt::amp::AmpMode::kOff);
  gpus.cuda_capabilities = {90, 80};
  config.amp.mode = std::nullopt;
  CHECK(nmt::job::resolve_amp(config, gpus).mode == nmt::amp::AmpMode::kBf16);
  CHECK(config.amp.mode == nmt::amp::AmpMode::kBf16);
}

TEST_CASE("rank setup: amp.mode auto's timing leaves training as it would have been without it",
          "[job]") {
  // A CPU with AVX512-BF16 (mocked, whatever this machine has) makes auto time the model.
  nmt::dist::DeviceInfo bf16_cpu = one_cpu();
  bf16_cpu.cpu.known = true;
  bf16_cpu.cpu.avx512f = true;
  bf16_cpu.cpu.avx512_bf16 = true;
  const std::vector<std::string> steps{"train.max_steps=4", "train.log_every=2",
                                       "model.dropout=0.1"};
  const TinyRun timed(steps);
  Rank a = nmt::job::set_up_rank(timed.command, timed.config(), {ResumeFrom::Mode::kNone, {}},
                                 bf16_cpu, nmt::dist::WorkerEnv{});
  REQUIRE(a.amp_timing.has_value());
  // The same run with the mode that the timing picked named in the config: nothing timed.
  std::vector<std::string> named = steps;
  named.push_back(std::string("amp.mode=") + nmt::amp::mode_name(a.amp.mode));
  const TinyRun fixed(named);
  Rank b = nmt::job::set_up_rank(fixed.command, fixed.config(), {ResumeFrom::Mode::kNone, {}},
                                 bf16_cpu, nmt::dist::WorkerEnv{});
  REQUIRE_FALSE(b.amp_timing.has_value());
  CHECK(b.setup.amp.mode == a.setup.amp.mode);
  CHECK(a.setup.max_tokens == b.setup.max_tokens);
  const auto train = [](Rank& rank) {
    nmt::train::Trainer trainer(rank.setup, rank.data);
    return trainer.run();
  };
  const nmt::train::RunSummary with_timing = train(a);
  const nmt::train::RunSummary without = train(b);
  // The timing and the training shared one planner: epoch 1 was planned once, not twice.
  REQUIRE(a.setup.planner != nullptr);
  CHECK(a.setup.planner->plans_made() == 1);
  CHECK(b.setup.planner->plans_made() == 1);
  CHECK(with_timing.final_step == 4);
  CHECK(with_timing.parameter_hashes == without.parameter_hashes);
  CHECK(with_timing.last_train_loss == without.last_train_loss);
  // The final checkpoints hold the whole state: parameters, the optimizer's moments and step,
  // the loss scaler, the random generators' states and the vocabulary. Every tensor is equal.
  REQUIRE_FALSE(with_timing.last_checkpoint.empty());
  REQUIRE_FALSE(without.last_checkpoint.empty());
  const auto saved_a = nmt::checkpoint::load_checkpoint(with_timing.last_checkpoint);
  const auto saved_b = nmt::checkpoint::load_checkpoint(without.last_checkpoint);
  REQUIRE(saved_a.tensors.size() == saved_b.tensors.size());
  int rng = 0, optimizer = 0;
  for (size_t i = 0; i < saved_a.tensors.size(); ++i) {
    const auto& [name, tensor] = saved_a.tensors[i];
    INFO(name);
    REQUIRE(saved_b.tensors[i].first == name);
    CHECK(at::equal(tensor, saved_b.tensors[i].second));
    rng += name.rfind("rng.", 0) == 0;
    optimizer += name.rfind("optim.", 0) == 0;
  }
  CHECK(rng > 0);
  CHECK(optimizer > 0);
}
