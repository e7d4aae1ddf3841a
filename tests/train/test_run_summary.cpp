#include "catch_torch.h"  // first: see the header

#include <filesystem>
#include <iterator>
#include <string>

#include "test_support.h"
#include "train/amp_timing.h"
#include "train/run_summary.h"

using nmt::train::RunKind;
using nmt::train::RunSummary;
using nmt::train::StopReason;

TEST_CASE("run summary: summary.json of a resumed training run, every key in its place",
          "[train][summary]") {
  // Scripts (scripts/, tests/e2e/) read these keys: the text is pinned whole.
  RunSummary s;
  s.stop_reason = StopReason::kSignal;
  s.final_step = 12;
  s.oom_skipped_updates = 1;
  s.epoch = 2;
  s.world_size = 2;
  s.parameter_hashes = {"00000000000000ab", "00000000000000ab"};
  s.peak_memory_mb = {10.5, 11};
  s.max_tokens = 2048;
  s.resumed_from = "run/checkpoints/checkpoint-00000008.safetensors";
  s.resumed_step = 8;
  s.last_train_loss = 3.25;
  s.last_checkpoint = "run/checkpoints/checkpoint-00000012.safetensors";
  s.tokens = 4000;
  s.tokens_per_s = 2000;
  s.train_s = 2;
  s.validation_s = 0.5;
  s.checkpoint_s = 0.25;
  s.wall_s = 4;
  s.amp_mode = "bf16";
  s.amp_auto = true;
  s.amp_reason = "GPU compute capability 9.0 >= 8.0 has bf16 tensor cores";
  CHECK(nmt::train::run_summary_json(s) == R"({
  "kind": "train",
  "stop_reason": "signal",
  "final_step": 12,
  "oom_skipped_updates": 1,
  "epoch": 2,
  "world_size": 2,
  "parameter_hashes": ["00000000000000ab", "00000000000000ab"],
  "peak_memory_mb": [10.5, 11],
  "max_tokens": 2048,
  "max_tokens_fit": null,
  "amp": {
    "mode": "bf16",
    "auto": true,
    "reason": "GPU compute capability 9.0 >= 8.0 has bf16 tensor cores",
    "timing": null
  },
  "resumed_from": {
    "path": "run/checkpoints/checkpoint-00000008.safetensors",
    "step": 8
  },
  "last_train_loss": 3.25,
  "last_valid_loss": null,
  "last_checkpoint": "run/checkpoints/checkpoint-00000012.safetensors",
  "tokens": 4000,
  "tokens_per_s": 2000,
  "train_s": 2,
  "validation_s": 0.5,
  "checkpoint_s": 0.25,
  "wall_s": 4
}
)");
}

TEST_CASE("run summary: the kind is written by name, and its details under that name",
          "[train][summary]") {
  CHECK(std::string(nmt::train::run_kind_name(RunKind::kTrain)) == "train");
  CHECK(std::string(nmt::train::run_kind_name(RunKind::kBenchmark)) == "benchmark");
  CHECK(std::string(nmt::train::run_kind_name(RunKind::kDryRun)) == "dry_run");
  CHECK(RunSummary{}.kind == RunKind::kTrain);

  RunSummary bench;
  bench.kind = RunKind::kBenchmark;
  bench.details = {{"benchmark_json", "run/benchmark.json"}, {"mfu", 0.25}};
  const std::string json = nmt::train::run_summary_json(bench);
  INFO(json);
  CHECK(json.rfind("{\n  \"kind\": \"benchmark\",\n  \"stop_reason\": \"completed\",\n", 0) == 0);
  CHECK(json.find("\n  \"benchmark\": {\n    \"benchmark_json\": \"run/benchmark.json\",\n"
                  "    \"mfu\": 0.25\n  }\n}\n") != std::string::npos);

  RunSummary dry;
  dry.kind = RunKind::kDryRun;
  dry.details["steps"] = int64_t{7};
  const std::string dry_json = nmt::train::run_summary_json(dry);
  INFO(dry_json);
  CHECK(dry_json.find("\"kind\": \"dry_run\"") != std::string::npos);
  CHECK(dry_json.find("\"dry_run\": {\n    \"steps\": 7\n  }") != std::string::npos);
  // Without details there is no member for them.
  CHECK(nmt::train::run_summary_json(RunSummary{}).find("\"train\": {") == std::string::npos);
}

TEST_CASE("run summary: every stop reason has its summary.json name", "[train][summary]") {
  using nmt::train::stop_reason_name;
  CHECK(std::string(stop_reason_name(StopReason::kMaxSteps)) == "max_steps");
  CHECK(std::string(stop_reason_name(StopReason::kMaxEpochs)) == "max_epochs");
  CHECK(std::string(stop_reason_name(StopReason::kMaxMinutes)) == "max_minutes");
  CHECK(std::string(stop_reason_name(StopReason::kSignal)) == "signal");
  CHECK(std::string(stop_reason_name(StopReason::kEarlyStop)) == "early_stop");
  CHECK(std::string(stop_reason_name(StopReason::kAlreadyDone)) == "already_done");
  CHECK(std::string(stop_reason_name(StopReason::kCompleted)) == "completed");
}

TEST_CASE("run summary: written atomically as run_dir/summary.json", "[train][summary]") {
  nmt::test::TempDir dir;
  RunSummary s;
  s.kind = RunKind::kDryRun;
  nmt::train::write_run_summary(dir.path() / "run", s);
  CHECK(nmt::test::read_file(dir.path() / "run" / "summary.json") ==
        nmt::train::run_summary_json(s));
  CHECK_FALSE(std::filesystem::exists(dir.path() / "run" / "summary.json.tmp"));
  // No temp file of any name is left beside it.
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path() / "run"),
                      std::filesystem::directory_iterator()) == 1);
}

TEST_CASE("run summary: what amp.mode auto timed goes under amp.timing", "[train][summary]") {
  nmt::train::AmpTiming timing;
  timing.warmup = 2;
  timing.padded_tokens = 8000;
  timing.fp32_steps = {0.25, 0.5};
  timing.bf16_steps = {1, 0.75};
  timing.fp32_s = 0.375;
  timing.bf16_s = 0.875;
  timing.seconds = 3.5;
  RunSummary s;
  s.amp_auto = true;
  s.amp_timing = timing.to_json();
  const std::string json = nmt::train::run_summary_json(s);
  INFO(json);
  CHECK(json.find(R"("timing": {
      "warmup": 2,
      "padded_tokens": 8000,
      "fp32_steps_s": [0.25, 0.5],
      "bf16_steps_s": [1, 0.75],
      "fp32_s": 0.375,
      "bf16_s": 0.875,
      "seconds": 3.5
    })") != std::string::npos);
}

TEST_CASE("run summary: what max_tokens auto measured, its probes on one line",
          "[train][summary]") {
  nmt::train::MaxTokensFit fit;
  fit.max_tokens = 3000;
  fit.sentences = 60;
  fit.length = 50;
  fit.peak_mb = 1.5;
  fit.memory_mb = 16;
  fit.headroom_mb = 0.25;
  fit.limit_mb = 12.5;
  fit.probes = {{32, int64_t{1} << 20}, {64, std::nullopt}};
  fit.seconds = 0.5;
  RunSummary s;
  s.max_tokens_fit = fit;
  const std::string json = nmt::train::run_summary_json(s);
  INFO(json);
  CHECK(json.find(R"(
  "max_tokens_fit": {
    "max_tokens": 3000,
    "sentences": 60,
    "length": 50,
    "peak_mb": 1.5,
    "memory_mb": 16,
    "headroom_mb": 0.25,
    "limit_mb": 12.5,
    "probes": [{"sentences": 32, "tokens": 1600, "peak_mb": 1}, {"sentences": 64, "tokens": 3200, "peak_mb": null}],
    "seconds": 0.5,
    "fallback": ""
  },
)") != std::string::npos);
}
