#include "catch_torch.h"  // first: see the header

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "data/batch_plan.h"
#include "train/loop_fixture.h"
#include "train/run_summary.h"
#include "train/stop_signal.h"
#include "train/trainer.h"
#include "util/error.h"

using nmt::test::loop_data;
using nmt::test::TempDir;
using nmt::test::tiny_run_setup;
using nmt::train::RunSummary;
using nmt::train::StopReason;
using nmt::train::Trainer;

namespace {

std::filesystem::path checkpoint_file(const std::filesystem::path& run_dir, int step) {
  char name[64];
  std::snprintf(name, sizeof(name), "checkpoint-%08d.safetensors", step);
  return run_dir / "checkpoints" / name;
}

/// Steps of the metrics.jsonl records of one type ("train" or "valid"), in file order.
std::vector<int> record_steps(const std::filesystem::path& run_dir, const std::string& type) {
  std::istringstream lines(nmt::test::read_file(run_dir / "metrics.jsonl"));
  std::vector<int> steps;
  for (std::string line; std::getline(lines, line);) {
    const auto record = nlohmann::ordered_json::parse(line);
    if (record.at("type") == type) steps.push_back(record.at("step").get<int>());
  }
  return steps;
}

/// A fresh trainer's run of `setup`.
RunSummary train(const nmt::train::RunSetup& setup) {
  Trainer trainer(setup, loop_data().prepared);
  return trainer.run();
}

/// A run of `setup` that continues from a checkpoint file.
RunSummary resume(const nmt::train::RunSetup& setup, const std::filesystem::path& file) {
  Trainer trainer(setup, loop_data().prepared);
  trainer.restore(nmt::checkpoint::load_checkpoint(file), file);
  return trainer.run();
}

}  // namespace

TEST_CASE("trainer: runs train.max_steps updates, logs every log_every and saves at the end",
          "[train][trainer]") {
  TempDir run;
  nmt::train::RunSetup setup = tiny_run_setup(run.path());
  setup.checkpoint.every_steps = 4;
  const RunSummary s = train(setup);
  CHECK(s.stop_reason == StopReason::kMaxSteps);
  CHECK(s.final_step == 6);
  CHECK(s.epoch == 1);  // 1000 pairs take more than 6 batches of 1024 tokens
  REQUIRE(s.last_train_loss);
  // A random model starts near ln(300) = 5.7 per token; label smoothing adds a little.
  CHECK(*s.last_train_loss > 2.0);
  CHECK(*s.last_train_loss < 8.0);
  CHECK_FALSE(s.last_valid_loss);  // valid_every 0
  CHECK(s.tokens > 6 * 100);
  CHECK(s.train_s > 0);
  CHECK(s.tokens_per_s == Approx(double(s.tokens) / s.train_s));
  REQUIRE(s.parameter_hashes.size() == 1);
  CHECK(std::regex_match(s.parameter_hashes[0], std::regex("[0-9a-f]{16}")));
  CHECK(s.peak_memory_mb.size() == 1);
  CHECK_FALSE(s.resumed_from);
  // The job's fields (run_summary.h) are left to the job.
  CHECK(s.max_tokens == 0);
  CHECK(s.wall_s == 0);
  CHECK_FALSE(s.max_tokens_fit);
  // Checkpoints at every_steps and at the end; metrics at every log step.
  CHECK(std::filesystem::exists(checkpoint_file(run.path(), 4)));
  CHECK(s.last_checkpoint == checkpoint_file(run.path(), 6).string());
  CHECK(std::filesystem::exists(s.last_checkpoint));
  CHECK_FALSE(std::filesystem::exists(checkpoint_file(run.path(), 2)));
  CHECK(record_steps(run.path(), "train") == std::vector<int>{2, 4, 6});
  CHECK(record_steps(run.path(), "valid").empty());
}

TEST_CASE("trainer: the same seed gives the same parameters, another seed others",
          "[train][trainer]") {
  TempDir a, b, c;
  nmt::train::RunSetup setup = tiny_run_setup(a.path());
  setup.train.max_steps = 3;
  const std::string first = train(setup).parameter_hashes.at(0);
  setup.run_dir = b.path();
  CHECK(train(setup).parameter_hashes.at(0) == first);
  setup.run_dir = c.path();
  setup.train.seed = 2;
  CHECK(train(setup).parameter_hashes.at(0) != first);
}

TEST_CASE("trainer: a run resumed from a checkpoint ends with the uninterrupted run's parameters",
          "[train][trainer][resume]") {
  TempDir whole, halves;
  nmt::train::RunSetup setup = tiny_run_setup(whole.path());
  const RunSummary uninterrupted = train(setup);

  setup.run_dir = halves.path();
  setup.train.max_steps = 3;
  const RunSummary first = train(setup);
  CHECK(first.final_step == 3);
  CHECK(first.parameter_hashes != uninterrupted.parameter_hashes);
  setup.train.max_steps = 6;
  const std::filesystem::path saved = checkpoint_file(halves.path(), 3);
  const RunSummary second = resume(setup, saved);
  CHECK(second.final_step == 6);
  CHECK(second.resumed_from == saved.string());
  CHECK(second.resumed_step == 3);
  CHECK(second.parameter_hashes == uninterrupted.parameter_hashes);
  // The first run logs its last, shorter interval at step 3; the resumed run only its own
  // steps, appended to the same metrics.jsonl.
  CHECK(record_steps(halves.path(), "train") == std::vector<int>{2, 3, 4, 6});
}

TEST_CASE("trainer: resumed at train.max_steps it has nothing to do and writes nothing",
          "[train][trainer][resume]") {
  TempDir run;
  nmt::train::RunSetup setup = tiny_run_setup(run.path());
  setup.train.max_steps = 2;
  const RunSummary done = train(setup);
  const std::filesystem::path saved = checkpoint_file(run.path(), 2);
  const auto written = std::filesystem::last_write_time(saved);
  const RunSummary again = resume(setup, saved);
  CHECK(again.stop_reason == StopReason::kAlreadyDone);
  CHECK(again.final_step == 2);
  CHECK(again.tokens == 0);
  CHECK(again.last_checkpoint.empty());
  CHECK(again.parameter_hashes == done.parameter_hashes);
  CHECK(std::filesystem::last_write_time(saved) == written);
}

TEST_CASE("trainer: a checkpoint of another model shape is refused on restore",
          "[train][trainer][resume]") {
  TempDir run, other;
  nmt::train::RunSetup setup = tiny_run_setup(run.path());
  setup.train.max_steps = 1;
  train(setup);
  nmt::train::RunSetup wider = tiny_run_setup(other.path());
  wider.model.d_model = 64;
  Trainer trainer(wider, loop_data().prepared);
  const std::filesystem::path saved = checkpoint_file(run.path(), 1);
  CHECK_THROWS_AS(trainer.restore(nmt::checkpoint::load_checkpoint(saved), saved),
                  nmt::CheckpointError);
}

TEST_CASE("trainer: train.max_epochs stops after the last update of that epoch",
          "[train][trainer]") {
  TempDir run;
  nmt::train::RunSetup setup = tiny_run_setup(run.path());
  setup.data.max_tokens = 4096;  // fewer, larger batches: a short epoch
  setup.max_tokens = 4096;
  setup.train.max_steps = 0;
  setup.train.max_epochs = 1;
  setup.train.log_every = 1000;
  const nmt::data::BatchPlanner planner(
      loop_data().prepared.train,
      nmt::data::plan_options(setup.data, setup.max_tokens, 1,
                              static_cast<uint64_t>(setup.train.seed)));
  const auto steps = planner.plan_epoch(1).num_steps();
  REQUIRE(steps > 1);
  const RunSummary s = train(setup);
  CHECK(s.stop_reason == StopReason::kMaxEpochs);
  CHECK(s.final_step == steps);
  CHECK(s.epoch == 1);
  // Every real token of the epoch was trained on, once.
  int64_t tokens = 0;
  for (const auto& part : loop_data().prepared.train.parts())
    tokens += part.cache.src_tokens() + part.cache.tgt_tokens() + 2 * part.cache.size();
  CHECK(s.tokens == tokens);
  // The interval left at the end is logged, so the loss is known.
  CHECK(s.last_train_loss);
  CHECK(record_steps(run.path(), "train") == std::vector<int>{int(steps)});
}

TEST_CASE(
    "trainer: validates every valid_every steps, saves with each validation, stops early "
    "after train.patience validations without improvement",
    "[train][trainer][validation]") {
  TempDir run;
  nmt::train::RunSetup setup = tiny_run_setup(run.path());
  // A constant zero learning rate leaves the parameters as they are: the second validation
  // is exactly as good as the first, which is no improvement.
  setup.train.lr = 0;
  setup.train.schedule = nmt::train::LrSchedule::kConstant;
  setup.train.warmup_steps = 0;
  setup.train.valid_every = 1;
  setup.train.patience = 1;
  const RunSummary s = train(setup);
  CHECK(s.stop_reason == StopReason::kEarlyStop);
  CHECK(s.final_step == 2);
  REQUIRE(s.last_valid_loss);
  CHECK(std::isfinite(*s.last_valid_loss));
  CHECK(s.validation_s > 0);
  CHECK(record_steps(run.path(), "valid") == std::vector<int>{1, 2});
  CHECK(std::filesystem::exists(checkpoint_file(run.path(), 1)));
  CHECK(s.last_checkpoint == checkpoint_file(run.path(), 2).string());
  // No final validation or save after the early stop: step 2 had both.
  CHECK(record_steps(run.path(), "valid").size() == 2);
}

TEST_CASE("trainer: resumed after train.max_epochs or an early stop it has nothing to do",
          "[train][trainer][resume]") {
  // Only max_steps counted as done: a rerun after max_epochs planned, validated again (one
  // more validation without improvement) and rewrote its checkpoint; one after an early stop
  // trained another update and saved it.
  TempDir run;
  nmt::train::RunSetup setup = tiny_run_setup(run.path());
  RunSummary done;
  SECTION("train.max_epochs") {
    setup.data.max_tokens = 4096;
    setup.max_tokens = 4096;
    setup.train.max_steps = 0;
    setup.train.max_epochs = 1;
    setup.train.valid_every = 1000;  // a validation at the end only
    done = train(setup);
    CHECK(done.stop_reason == StopReason::kMaxEpochs);
  }
  SECTION("train.patience") {
    setup.train.lr = 0;  // no improvement, as in the case above
    setup.train.schedule = nmt::train::LrSchedule::kConstant;
    setup.train.warmup_steps = 0;
    setup.train.valid_every = 1;
    setup.train.patience = 1;
    done = train(setup);
    CHECK(done.stop_reason == StopReason::kEarlyStop);
  }
  const std::filesystem::path saved = checkpoint_file(run.path(), int(done.final_step));
  REQUIRE(std::filesystem::exists(saved));
  const auto written = std::filesystem::last_write_time(saved);
  const auto validations = record_steps(run.path(), "valid");
  const RunSummary again = resume(setup, saved);
  CHECK(again.stop_reason == StopReason::kAlreadyDone);
  CHECK(again.final_step == done.final_step);
  CHECK(again.tokens == 0);
  CHECK(again.last_checkpoint.empty());
  CHECK(again.parameter_hashes == done.parameter_hashes);
  CHECK(std::filesystem::last_write_time(saved) == written);
  CHECK(record_steps(run.path(), "valid") == validations);
  CHECK_FALSE(std::filesystem::exists(checkpoint_file(run.path(), int(done.final_step) + 1)));
}

TEST_CASE("trainer: a run from an earlier step sets the later checkpoints aside",
          "[train][trainer][resume]") {
  // A run resumed from step 2 beside checkpoints of steps 4 and 6 (of the run it replaces):
  // retention deleted its own saves once they fell behind those, and a later --resume auto
  // took the replaced run's step 6. They are moved into checkpoints/superseded-<time>/.
  TempDir run;
  nmt::train::RunSetup setup = tiny_run_setup(run.path());
  setup.checkpoint.every_steps = 2;
  setup.checkpoint.keep_last = 3;
  const RunSummary first = train(setup);
  REQUIRE(first.final_step == 6);
  setup.train.max_steps = 4;
  const RunSummary second = resume(setup, checkpoint_file(run.path(), 2));
  CHECK(second.final_step == 4);
  std::vector<std::filesystem::path> aside;
  for (const auto& entry : std::filesystem::directory_iterator(run.path() / "checkpoints"))
    if (entry.is_directory()) aside.push_back(entry.path());
  REQUIRE(aside.size() == 1);
  CHECK_THAT(aside[0].filename().string(), Catch::Matchers::StartsWith("superseded-"));
  CHECK(std::filesystem::exists(aside[0] / checkpoint_file(run.path(), 4).filename()));
  CHECK(std::filesystem::exists(aside[0] / checkpoint_file(run.path(), 6).filename()));
  // What is left beside them is this run's: its start and its save, the newest.
  CHECK(std::filesystem::exists(checkpoint_file(run.path(), 2)));
  CHECK(second.last_checkpoint == checkpoint_file(run.path(), 4).string());
  CHECK_FALSE(std::filesystem::exists(checkpoint_file(run.path(), 6)));
  // Their records went with them (they were rewritten away): the replaced run's steps 4 and 6
  // in the folder, this run's 4 in the run's file after the step 2 both share.
  CHECK(record_steps(aside[0], "train") == std::vector<int>{4, 6});
  CHECK(record_steps(run.path(), "train") == std::vector<int>{2, 4});
}

// Last in this file: the stop request cannot be withdrawn, so it would stop every later case
// run in the same process (CTest runs each case in a process of its own).
TEST_CASE("trainer: SIGTERM stops the run after the update in progress, with a checkpoint",
          "[train][trainer][signal]") {
  TempDir run;
  nmt::train::RunSetup setup = tiny_run_setup(run.path());
  setup.train.max_steps = 5000;  // far more than the signal needs; a bound if it is lost
  setup.train.log_every = 1;
  nmt::train::install_stop_handlers();
  // Once step 2 is in metrics.jsonl, as the loop runs on.
  std::atomic<bool> done{false};
  std::thread signaller([&run, &done] {
    while (record_steps(run.path(), "train").size() < 2 && !done)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (!done) std::raise(SIGTERM);
  });
  struct Join {  // also when the run throws
    std::atomic<bool>& done;
    std::thread& thread;
    ~Join() {
      done = true;
      thread.join();
    }
  } join{done, signaller};
  const RunSummary s = train(setup);
  CHECK(nmt::train::stop_requested());
  CHECK(s.stop_reason == StopReason::kSignal);
  CHECK(s.final_step >= 2);
  CHECK(s.final_step < 5000);
  CHECK(s.last_checkpoint == checkpoint_file(run.path(), int(s.final_step)).string());
  CHECK(std::filesystem::exists(s.last_checkpoint));
}
