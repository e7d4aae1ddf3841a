// End-to-end: nmt-train trains the tiny config on the shipped corpus, checkpoints, and resumes
// exactly (checked bit for bit with nmt-ckpt diff --atol 0).
#include <catch2/catch.hpp>
#include "skip.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <regex>
#include <vector>

#include "train_support.h"

using Catch::Matchers::Contains;
using nmt::test::run_command;
using nmt::test::TempDir;

namespace {

using nmt::test::checkpoint_path;
using nmt::test::count_lines_with;
using nmt::test::shared_vocab;
const std::string kTrain = nmt::test::kTrainBin;
const std::string kCkpt = nmt::test::kCkptBin;

/// nmt-train on the tiny config with small, fast settings, then `extra` flags.
nmt::test::CommandResult train(const std::filesystem::path& run_dir, const std::string& extra) {
  return run_command(kTrain + nmt::test::small_run_flags(run_dir) + " " + extra);
}

/// nmt-ckpt diff --atol 0 of two checkpoints: exit code 0 when bitwise equal.
int diff_exact(const std::string& a, const std::string& b) {
  return nmt::test::checkpoint_diff(a, b, "0");
}

/// Values of `key` in metrics.jsonl records of the given type, in order.
std::vector<double> metric(const std::filesystem::path& run_dir, const std::string& type,
                           const std::string& key) {
  std::vector<double> values;
  for (const auto& record :
       nmt::test::json_values(nmt::test::read_file(run_dir / "metrics.jsonl"))) {
    if (record.value("type", "") != type) continue;
    const auto value = record.find(key);
    if (value != record.end() && value->is_number()) values.push_back(value->get<double>());
  }
  return values;
}

}  // namespace

TEST_CASE("tiny config trains with falling validation loss and logs metrics", "[e2e][train]") {
  TempDir run;
  auto r = train(run.path(), "--set train.max_steps=48 --set train.valid_every=16");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("[train] step 48/48"));
  CHECK_THAT(r.err, Contains("[valid] step 48"));
  const auto valid = metric(run.path(), "valid", "loss");
  REQUIRE(valid.size() == 3);
  CHECK(valid[2] < valid[0]);
  const auto train_loss = metric(run.path(), "train", "loss");
  REQUIRE(train_loss.size() == 12);
  CHECK(train_loss.back() < train_loss.front());
  for (const char* key : {"tokens_per_s", "lr", "grad_norm", "loss_scale", "peak_memory_mb",
                          "host_private_mb", "host_shared_mb", "eta_s", "data_wait_s",
                          "forward_s", "backward_s", "optimizer_s"}) {
    CHECK(metric(run.path(), "train", key).size() == 12);
  }
  // On a CPU the phases run as the host calls them: the split is wall time, and says so.
  CHECK_THAT(nmt::test::read_file(run.path() / "metrics.jsonl"),
             Contains("\"time_split\": \"wall\""));
  CHECK(std::filesystem::exists(checkpoint_path(run.path(), 48)));
}

TEST_CASE("N steps straight equal N/2 steps, stop, and resume, bit for bit", "[e2e][train]") {
  for (const char* amp : {"off", "bf16", "fp16"}) {
    DYNAMIC_SECTION("amp " << amp) {
      TempDir straight, resumed;
      const std::string mode = std::string(" --set amp.mode=") + amp;
      REQUIRE(train(straight.path(), "--set train.max_steps=16" + mode).exit_code == 0);
      const auto first = train(resumed.path(), "--set train.max_steps=8" + mode);
      REQUIRE(first.exit_code == 0);
      auto r = train(resumed.path(), "--set train.max_steps=16" + mode);
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      CHECK_THAT(r.err, Contains("resumed from"));
      // The steps of the epoch are said once per run, from the plan the batches come from,
      // the same number again on resume.
      std::smatch m;
      REQUIRE(std::regex_search(first.err, m, std::regex("\\] ([0-9]+) steps in epoch 1\n")));
      CHECK(count_lines_with(first.err, "steps in epoch") == 1);
      CHECK_THAT(r.err, Contains("] " + m[1].str() + " steps in epoch 1, continuing at its step 8\n"));
      CHECK(count_lines_with(r.err, "steps in epoch") == 1);
      CHECK(diff_exact(checkpoint_path(straight.path(), 16), checkpoint_path(resumed.path(), 16)) ==
            0);
      // The tool can tell different states apart.
      CHECK(diff_exact(checkpoint_path(straight.path(), 8), checkpoint_path(straight.path(), 16)) !=
            0);
    }
  }
}

TEST_CASE("SIGTERM finishes the update, saves, and the resumed run matches", "[e2e][train]") {
  TempDir straight, stopped;
  // The token cache first (a dry run), so the 4 s before the signal are spent training, not
  // encoding the corpus (~1-3 s for the shipped 41,931 pairs here, more under load).
  REQUIRE(run_command(kTrain + " --config configs/tiny.yaml --dry-run --log-level warn --set run_dir=" +
                      stopped.path().string() + " --set data.spm_model=" + shared_vocab())
              .exit_code == 0);
  // Stop a long run after a moment; it must save a checkpoint and exit cleanly.
  auto r = run_command("{ timeout -s TERM 4 " + kTrain +
                       " --config configs/tiny.yaml --set run_dir=" + stopped.path().string() +
                       " --set data.spm_model=" + shared_vocab() +
                       " --set data.max_tokens=1024 --set train.log_every=4 --set "
                       "train.valid_every=0 --set checkpoint.every_steps=1000 --set "
                       "train.threads=1 --set train.max_steps=100000; echo exit=$?; }");
  INFO(r.err);
  CHECK_THAT(r.out, Contains("exit=124"));  // timeout's code: it did have to send the signal
  CHECK_THAT(r.err, Contains("stopped by signal at step"));
  std::smatch m;
  const std::regex stopped_at("stopped by signal at step ([0-9]+)");
  REQUIRE(std::regex_search(r.err, m, stopped_at));
  const int step = std::stoi(m[1]);
  REQUIRE(step > 0);
  const int target = step + 3;
  REQUIRE(train(stopped.path(), "--set train.max_steps=" + std::to_string(target)).exit_code == 0);
  REQUIRE(train(straight.path(), "--set train.max_steps=" + std::to_string(target)).exit_code == 0);
  CHECK(diff_exact(checkpoint_path(straight.path(), target),
                   checkpoint_path(stopped.path(), target)) == 0);
}

TEST_CASE("a truncated newest checkpoint is skipped for the previous one", "[e2e][train]") {
  TempDir straight, damaged;
  REQUIRE(train(straight.path(), "--set train.max_steps=12").exit_code == 0);
  REQUIRE(train(damaged.path(), "--set train.max_steps=8").exit_code == 0);
  const auto newest = checkpoint_path(damaged.path(), 8);
  std::filesystem::resize_file(newest, std::filesystem::file_size(newest) / 2);
  auto r = train(damaged.path(), "--set train.max_steps=12");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("skipping " + newest));
  CHECK_THAT(r.err, Contains("resumed from " + checkpoint_path(damaged.path(), 4)));
  CHECK(diff_exact(checkpoint_path(straight.path(), 12), checkpoint_path(damaged.path(), 12)) == 0);
}

TEST_CASE("resuming into a different model or vocabulary is refused with the reason",
          "[e2e][train]") {
  TempDir run;
  REQUIRE(train(run.path(), "--set train.max_steps=4").exit_code == 0);
  auto shape = train(run.path(), "--set train.max_steps=8 --set model.ffn_dim=256");
  CHECK(shape.exit_code == 1);
  CHECK_THAT(shape.err, Contains("in the checkpoint but"));
  CHECK_THAT(shape.err, Contains(checkpoint_path(run.path(), 4)));
  auto fresh = train(run.path(), "--set train.max_steps=2 --resume none --set run_dir=" +
                                     (run.path() / "fresh").string());
  CHECK(fresh.exit_code == 0);
  auto missing = train(run.path(), "--resume " + (run.path() / "nope.safetensors").string());
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.err, Contains("nope.safetensors"));
}

TEST_CASE("validation BLEU and chrF reach metrics.jsonl and pick the best checkpoint",
          "[e2e][train]") {
  TempDir run;
  // A 60-sentence validation set keeps validation translation short.
  const auto head = [&](const char* file, const char* name) {
    std::ifstream in(std::string("data/") + file);
    std::string text, line;
    for (int i = 0; i < 60 && std::getline(in, line); ++i) text += line + "\n";
    return run.write(name, text).string();
  };
  const std::string valid = " --set data.valid_src=" + head("ddtp.en-de.valid.en", "v.en") +
                            " --set data.valid_tgt=" + head("ddtp.en-de.valid.de", "v.de");
  auto r = train(run.path(),
                 "--set train.max_steps=8 --set train.valid_every=4 "
                 "--set train.valid_translate=true --set train.best_metric=chrf" +
                     valid);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("| BLEU "));
  CHECK(metric(run.path(), "valid", "bleu").size() == 2);
  CHECK(metric(run.path(), "valid", "chrf").size() == 2);
  auto info = run_command(kCkpt + " info " + checkpoint_path(run.path(), 8));
  CHECK_THAT(info.out, Contains("\"valid_chrf\""));
  CHECK_THAT(info.out, Contains("\"selection\": \"-"));  // minus chrF: lower is better
}

TEST_CASE("early stopping after patience validations survives a resume", "[e2e][train]") {
  TempDir run;
  // lr 0: the validation loss never improves after the first validation.
  const std::string flat = " --set train.lr=0 --set train.valid_every=2 --set train.patience=2";
  auto first = train(run.path(), "--set train.max_steps=4" + flat);
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.err, Contains("1 without improvement"));
  // Resumed, the count goes on from 1: the next validation (step 6) stops the run.
  auto second = train(run.path(), "--set train.max_steps=100" + flat);
  INFO(second.err);
  REQUIRE(second.exit_code == 0);
  CHECK_THAT(second.err, Contains("early stop: 2 validations without improvement"));
  CHECK(std::filesystem::exists(checkpoint_path(run.path(), 6)));
  CHECK_FALSE(std::filesystem::exists(checkpoint_path(run.path(), 8)));
}

TEST_CASE("fp16 loss scaling does not overflow the first updates of a token-summed loss",
          "[e2e][train]") {
  // The loss is a sum over the update's target tokens: scaled by the initial 65536 as it is,
  // its weight gradients overflow half precision and the first updates were all skipped.
  TempDir run;
  auto r = train(run.path(), "--set amp.mode=fp16 --set train.max_steps=8");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto skipped = metric(run.path(), "train", "skipped_updates");
  REQUIRE(skipped.size() == 2);
  CHECK(skipped.back() == 0);
  CHECK(metric(run.path(), "train", "loss_scale").back() == 65536);
  if (r.err.find("device cpu") != std::string::npos)
    CHECK_THAT(r.err, Contains("amp.mode fp16 on CPU") && Contains("use bf16 on CPU"));
}

TEST_CASE("resuming a bf16 or fp32 run in fp16 starts loss scaling from amp.init_scale",
          "[e2e][train]") {
  // Without scaling the scaler's state holds scale 1; adopted by an fp16 run, small gradients
  // underflow half precision until the scale has grown back, one doubling per growth_interval.
  for (const char* before : {"bf16", "off"}) {
    DYNAMIC_SECTION("from " << before) {
      TempDir run;
      REQUIRE(train(run.path(), std::string("--set train.max_steps=4 --set amp.mode=") + before)
                  .exit_code == 0);
      const auto r = train(run.path(), "--set train.max_steps=8 --set amp.mode=fp16");
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      CHECK_THAT(r.err, Contains("resumed from"));
      CHECK_THAT(r.err, Contains("loss scaling starts at amp.init_scale 65536"));
      const auto scales = metric(run.path(), "train", "loss_scale");
      REQUIRE(scales.size() == 2);
      CHECK(scales.back() == 65536);
    }
  }
}

namespace {

/// What a run's summary.json says data.max_tokens: auto measured.
struct AutoFit {
  int64_t max_tokens = 0, sentences = 0, length = 0;
  double peak_mb = 0, allowed_mb = 0;
};

std::optional<AutoFit> auto_fit(const std::filesystem::path& run_dir) {
  const std::string json = nmt::test::read_file(run_dir / "summary.json");
  REQUIRE_FALSE(json.empty());
  const auto fit = nlohmann::ordered_json::parse(json).at("max_tokens_fit");
  if (fit.is_null()) return std::nullopt;
  return AutoFit{fit.at("max_tokens").get<int64_t>(), fit.at("sentences").get<int64_t>(),
                 fit.at("length").get<int64_t>(), fit.at("peak_mb").get<double>(),
                 fit.at("limit_mb").get<double>()};
}

/// configs/tiny.yaml with data.max_tokens: auto, written into `dir`.
std::string tiny_auto_config(const TempDir& dir) {
  const std::string yaml = nmt::test::read_file("configs/tiny.yaml");
  const std::regex budget("max_tokens: \\d+");
  REQUIRE(std::regex_search(yaml, budget));
  return dir.write("tiny-auto.yaml", std::regex_replace(yaml, budget, "max_tokens: auto")).string();
}

}  // namespace

TEST_CASE("max_tokens auto fits a memory budget, trains as the number it chose, and resumes with it",
          "[e2e][train][auto]") {
  TempDir fitted, fixed, configs;
  const std::string command = kTrain + " --config " + tiny_auto_config(configs) +
                              " --set run_dir=" + fitted.path().string() +
                              " --set data.spm_model=" + shared_vocab() +
                              " --set data.auto_memory_mb=300 --set train.log_every=4"
                              " --set train.valid_every=0 --set checkpoint.every_steps=4"
                              " --set train.threads=1 --set train.max_steps=";
  auto r = run_command(command + "4");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto fit = auto_fit(fitted.path());
  REQUIRE(fit.has_value());
  CHECK(fit->allowed_mb == Approx(270));  // 0.9 x 300 MiB
  CHECK(fit->peak_mb <= fit->allowed_mb);
  CHECK(fit->sentences >= 2);
  CHECK(fit->max_tokens == fit->sentences * fit->length);
  const std::string budget = " --set data.max_tokens=" + std::to_string(fit->max_tokens);
  // The measurement leaves nothing behind: the same run with the number is identical.
  REQUIRE(train(fixed.path(), "--set train.max_steps=4" + budget).exit_code == 0);
  CHECK(diff_exact(checkpoint_path(fitted.path(), 4), checkpoint_path(fixed.path(), 4)) == 0);
  // The checkpoint holds the number, which ranks above the file's auto: the resumed run
  // plans the same batches without measuring again, and matches a straight run.
  r = run_command(command + "8");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("resumed from"));
  CHECK_FALSE(auto_fit(fitted.path()).has_value());
  REQUIRE(train(fixed.path(), "--set train.max_steps=8" + budget).exit_code == 0);
  CHECK(diff_exact(checkpoint_path(fitted.path(), 8), checkpoint_path(fixed.path(), 8)) == 0);
}

TEST_CASE("max_tokens auto stops every rank, naming the limit, when one sentence does not fit",
          "[e2e][train][auto]") {
  TempDir run;
  const auto start = std::chrono::steady_clock::now();
  // FFN matrices of 2 MiB: on CPU the measurement sees blocks of 1 MiB and more only.
  const auto r = train(run.path(), "--set data.max_tokens=auto --set data.auto_memory_mb=5 "
                                   "--set model.ffn_dim=4096 --set train.max_steps=2 "
                                   "--nproc-per-node 2");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.err);
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Contains("data.max_tokens auto: rank ") &&
                        Contains("at its peak, more than the 4 MiB allowed (sentences of ") &&
                        Contains("data.auto_memory_mb and data.auto_memory_fraction set the limit"));
  CHECK(seconds < 120);  // not a hang until dist.timeout_s (600 s)
}

TEST_CASE("max_tokens auto on CPU without a memory budget says so and uses 4096", "[e2e][train][auto]") {
  TempDir run;
  const auto r = train(run.path(), "--set data.max_tokens=auto --set train.max_steps=1");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  if (r.err.find("CPU worker") == std::string::npos) {
    NMT_SKIP("this machine has a GPU, where auto measures its memory");
  }
  CHECK_THAT(r.err, Contains("data.max_tokens auto: on CPU there is no device memory to fill") &&
                        Contains("using 4096"));
}

TEST_CASE("max_tokens auto on a GPU fits the batch of the longest sentences into its memory",
          "[e2e][train][auto][cuda]") {
  TempDir run;
  const auto r = train(run.path(), "--set data.max_tokens=auto --set train.max_steps=2 "
                                   "--set amp.mode=bf16 --set data.auto_max_tokens_limit=1000000");
  if (r.err.find("CPU worker") != std::string::npos) {
    NMT_SKIP_WITHOUT_CUDA("no GPU");
  }
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto fit = auto_fit(run.path());
  REQUIRE(fit.has_value());
  CHECK(fit->peak_mb <= fit->allowed_mb);
  CHECK(fit->max_tokens > 4096);  // a tiny model on any GPU fits far more than the default
}

TEST_CASE("every kind of run writes summary.json for scripts: training, resume, dry run, benchmark",
          "[e2e][train][summary]") {
  using nmt::test::json_number;
  using nmt::test::json_string;
  using nmt::test::read_file;
  TempDir run, dry, bench;
  auto r = train(run.path(), "--set train.max_steps=4 --set train.valid_every=2");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::string json = read_file(run.path() / "summary.json");
  INFO(json);
  CHECK(json_string(json, "kind") == "train");
  // Throughput counts training time only; validation and checkpoints are reported beside it.
  const double train_s = json_number(json, "train_s").value_or(0);
  CHECK(train_s > 0);
  CHECK(json_number(json, "validation_s").value_or(0) > 0);
  CHECK(json_number(json, "checkpoint_s").value_or(0) > 0);
  CHECK(json_number(json, "tokens_per_s").value_or(0) ==
        Approx(json_number(json, "tokens").value_or(0) / train_s).epsilon(1e-6));
  CHECK(train_s + json_number(json, "validation_s").value_or(0) <
        json_number(json, "wall_s").value_or(0));
  CHECK(json_string(json, "stop_reason") == "max_steps");
  CHECK(json_number(json, "final_step") == 4);
  CHECK(json_number(json, "max_tokens") == 1024);
  CHECK(json_number(json, "tokens_per_s").value_or(0) > 0);
  CHECK_THAT(json, Contains("\"resumed_from\": null") && Contains("\"max_tokens_fit\": null"));
  const std::vector<std::string> hashes = nmt::test::json_strings(json, "parameter_hashes");
  REQUIRE(hashes.size() == 1);
  CHECK(std::regex_match(hashes[0], std::regex("[0-9a-f]{16}")));
  CHECK(json_string(json, "last_checkpoint") == checkpoint_path(run.path(), 4));

  r = train(run.path(), "--set train.max_steps=6");
  REQUIRE(r.exit_code == 0);
  json = read_file(run.path() / "summary.json");
  CHECK(json_number(json, "final_step") == 6);
  CHECK(json_string(json, "path") == checkpoint_path(run.path(), 4));  // resumed_from.path
  CHECK(json_number(json, "step") == 4);                              // resumed_from.step

  r = run_command(kTrain + " --config configs/tiny.yaml --dry-run --nproc-per-node 2 --set run_dir=" +
                  dry.path().string() + " --set data.spm_model=" + shared_vocab() +
                  " --set amp.mode=auto");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("[data] train: 41931 pairs read"));  // the shipped set, gzipped
  json = read_file(dry.path() / "summary.json");
  CHECK(json_string(json, "kind") == "dry_run");
  // amp.mode auto: the plan's choice and its reason (a dry run times nothing: "auto" where
  // the CPU's choice awaits timing).
  CHECK_THAT(json, Contains("\"auto\": true") && Contains("\"timing\": null"));
  CHECK_FALSE(json_string(json, "reason").value_or("").empty());
  CHECK(json_number(json, "world_size") == 2);
  CHECK(json_number(json, "padding_efficiency").value_or(0) > 0.5);

  r = train(bench.path(), "--benchmark 1 --benchmark-warmup 0");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  json = read_file(bench.path() / "summary.json");
  CHECK(json_string(json, "kind") == "benchmark");
  CHECK(json_string(json, "benchmark_json") == (bench.path() / "benchmark.json").string());
  CHECK(json_number(json, "tokens_per_s").value_or(0) > 0);
}
