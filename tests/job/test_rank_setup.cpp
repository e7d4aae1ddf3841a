// job/rank_setup: one CPU rank of a tiny config, set up directly: its place (threads, device,
// workers), the data, and every auto settled (amp.mode, data.max_tokens) before the run is built.
#include "catch_torch.h"

#include <ATen/Parallel.h>

#include <string>

#include "config/run_config.h"
#include "data/batch_plan.h"
#include "job/amp_agreement.h"
#include "job/job_fixture.h"
#include "job/rank_setup.h"
#include "train/trainer.h"
#include "util/error.h"

using nmt::config::ResumeFrom;
using nmt::config::RunConfig;
using nmt::job::Rank;
using nmt::test::one_cpu;
using nmt::test::set_up;
using nmt::test::TinyRun;

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
  CHECK(rank.setup.precision == rank.amp.mode);  // what autocast and the scaler read
  // The stored config (what checkpoints hold) names the mode, so a resume keeps it.
  CHECK(rank.setup.config_yaml.find(std::string("mode: ") + nmt::amp::mode_name(rank.amp.mode)) !=
        std::string::npos);

  TinyRun named({"amp.mode=off"});
  const Rank kept = set_up(named);
  CHECK(kept.config.amp.mode == nmt::amp::AmpMode::kOff);
  CHECK_FALSE(kept.amp.automatic);
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
  CHECK(b.setup.precision == a.setup.precision);
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
