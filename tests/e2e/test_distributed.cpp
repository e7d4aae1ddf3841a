// End-to-end: several CPU worker processes (Gloo) under nmt-train's own launcher, torchrun and
// mpirun; equivalence with one process; failures that stop everyone.
#include <catch2/catch.hpp>
#include "skip.h"

#include <fstream>
#include <regex>

#include "train_support.h"

using Catch::Matchers::Contains;
using nmt::test::run_command;
using nmt::test::TempDir;

namespace {

using nmt::test::checkpoint_diff;
using nmt::test::checkpoint_path;
using nmt::test::exact_run_flags;
const std::string kTrain = nmt::test::kTrainBin;
const std::string kPython = NMT_PYTHON;

/// The final parameter hash of a rank, from the run's summary.json ("" when absent).
std::string parameter_hash(const std::filesystem::path& run_dir, int rank) {
  const std::vector<std::string> hashes =
      nmt::test::json_strings(nmt::test::read_file(run_dir / "summary.json"), "parameter_hashes");
  return static_cast<size_t>(rank) < hashes.size() ? hashes[static_cast<size_t>(rank)] : "";
}

}  // namespace

TEST_CASE("2 ranks under the built-in launcher equal 1 rank with update_freq 2", "[e2e][dist]") {
  TempDir two, one, after_backward;
  auto r = run_command("timeout 300 " + kTrain + exact_run_flags(two.path()) +
                       " --nproc-per-node 2 --set train.max_steps=6");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("[rank 0] "));  // the launcher prefixes each worker's lines
  CHECK_THAT(r.err, Contains("all 2 worker(s) exited with code 0"));
  // Replicas stay identical.
  const std::string hash = parameter_hash(two.path(), 0);
  CHECK(hash.size() == 16);
  CHECK(parameter_hash(two.path(), 1) == hash);
  // The same global batch in one process, accumulated over two steps.
  REQUIRE(run_command(kTrain + exact_run_flags(one.path()) +
                      " --set data.update_freq=2 --set train.max_steps=6")
              .exit_code == 0);
  CHECK(checkpoint_diff(checkpoint_path(one.path(), 6), checkpoint_path(two.path(), 6), "1e-5") ==
        0);
  // All-reduce after backward instead of overlapped: the same sums.
  REQUIRE(run_command("timeout 300 " + kTrain + exact_run_flags(after_backward.path()) +
                      " --nproc-per-node 2 --set train.max_steps=6 --set dist.overlap=false")
              .exit_code == 0);
  CHECK(checkpoint_diff(checkpoint_path(after_backward.path(), 6), checkpoint_path(two.path(), 6),
                        "0") == 0);
}

TEST_CASE("torchrun and mpirun start workers without flags", "[e2e][dist]") {
  const std::string torchrun = std::filesystem::path(kPython).parent_path() / "torchrun";
  std::string not_run;  // what could not run here: the case ends skipped, saying so
  if (!std::filesystem::exists(torchrun)) {
    not_run = "torchrun (" + torchrun + " not found)";
  } else {
    TempDir run;
    auto r = run_command("timeout 300 " + torchrun + " --nproc-per-node=2 --no-python " + kTrain +
                         exact_run_flags(run.path()) + " --set train.max_steps=4");
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Contains("started by torchrun as rank 0 of 2"));
    CHECK(parameter_hash(run.path(), 1) == parameter_hash(run.path(), 0));
  }
  // Without torchrun's agent store: rank 0 hosts the store (as with RANK/WORLD_SIZE set by
  // hand or another launcher).
  {
    TempDir run;
    const std::string env =
        "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(nmt::test::free_port()) +
        " WORLD_SIZE=2 ";
    auto r = run_command("export " + env + "; (RANK=1 LOCAL_RANK=1 timeout 300 " + kTrain +
                         exact_run_flags(run.path()) +
                         " --set train.max_steps=4 > /dev/null 2>&1 &) ; RANK=0 "
                         "LOCAL_RANK=0 timeout 300 " +
                         kTrain + exact_run_flags(run.path()) + " --set train.max_steps=4; wait");
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Contains("started by torchrun as rank 0 of 2"));
    // No LOCAL_WORLD_SIZE: the ranks of this host are counted, not assumed one per GPU.
    CHECK_THAT(r.err, Contains("2 rank(s) on this host"));
  }
  if (run_command("command -v mpirun").exit_code != 0) {
    NMT_SKIP((not_run.empty() ? "" : not_run + " and ") << "mpirun (not installed)");
  }
  TempDir run;
  auto r = run_command(
      "timeout 300 mpirun -np 2 --allow-run-as-root --oversubscribe -x "
      "MASTER_PORT=" + std::to_string(nmt::test::free_port()) + " " +
      kTrain + exact_run_flags(run.path()) + " --set train.max_steps=4");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("started by mpirun as rank 0 of 2"));
  CHECK(parameter_hash(run.path(), 1) == parameter_hash(run.path(), 0));
  if (!not_run.empty()) NMT_SKIP(not_run << "; the rest ran");
}

TEST_CASE("a killed worker stops the launcher naming the rank, and a rerun resumes", "[e2e][dist]") {
  TempDir run;
  // Train in the background, kill -9 rank 1 once a checkpoint exists, time the launcher's exit.
  const std::string script =
      "(timeout 300 " + kTrain + exact_run_flags(run.path()) +
      " --nproc-per-node 2 --set train.max_steps=100000 > " + (run.path() / "out").string() +
      " 2>&1; echo $? > " + (run.path() / "rc").string() +
      ") & launcher=$!\n"
      "for i in $(seq 600); do ls " +
      (run.path() / "checkpoints").string() +
      "/*.safetensors >/dev/null 2>&1 && break; sleep 0.1; done\n"
      "pid=$(grep -o 'pid [0-9]*' " +
      (run.path() / "logs" / "rank1.log").string() +
      " | head -n1 | cut -d' ' -f2)\n"
      "start=$(date +%s%N); kill -9 $pid; wait $launcher; end=$(date +%s%N)\n"
      "echo milliseconds=$(( (end - start) / 1000000 ))\n";
  auto r = run_command("bash " + run.write("kill.sh", script).string());
  INFO(r.out << r.err);
  const std::string out = nmt::test::read_file(run.path() / "out");
  INFO(out);
  CHECK(nmt::test::read_file(run.path() / "rc") != "0\n");
  CHECK_THAT(out, Contains("worker rank 1 exited with"));
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex("milliseconds=([0-9]+)")));
  CHECK(std::stol(m[1]) < 60000);
  // The rerun resumes from the last checkpoint and finishes, with the checkpoint's 2 workers
  // though it does not say --nproc-per-node (the launcher counted them from the YAML alone).
  auto again = run_command("timeout 300 " + kTrain + exact_run_flags(run.path()) +
                           " --set train.max_steps=6");
  INFO(again.err);
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.err, Contains("resumed from"));
  CHECK_THAT(again.err, Contains("all 2 worker(s) exited with code 0"));
}

TEST_CASE("ranks with different configs refuse to train together", "[e2e][dist]") {
  TempDir run;
  auto r = run_command(
      "export MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(nmt::test::free_port()) + " "
      "WORLD_SIZE=2; (RANK=1 timeout 120 " +
      kTrain + exact_run_flags(run.path()) +
      " --set train.max_steps=2 --set train.lr=0.5 > /dev/null 2>&1 &); RANK=0 "
      "timeout 120 " +
      kTrain + exact_run_flags(run.path()) +
      " --set train.max_steps=2; "
      "echo rank0=$?; wait");
  INFO(r.err);
  CHECK_THAT(r.out, Contains("rank0=1"));
  CHECK_THAT(r.err, Contains("ranks disagree: rank 0 has config"));
}

TEST_CASE("the built-in launcher, torchrun and mpirun train the same vocabulary and parameters",
          "[e2e][dist]") {
  // Each run trains its own SentencePiece model (no shared one): the launchers give a process
  // different core counts, which must change neither the vocabulary nor the parameters.
  const auto own_vocab_flags = [](const std::filesystem::path& run_dir) {
    return " --config configs/tiny.yaml --set run_dir=" + run_dir.string() +
           " --set data.vocab_size=1000 --set model.dropout=0 --set train.threads=1"
           " --set data.max_tokens=1024 --set train.valid_every=0 --set train.log_every=4"
           " --set checkpoint.every_steps=12 --set train.max_steps=12" +
           nmt::test::train_slice_flags();
  };
  TempDir builtin;
  auto r = run_command("timeout 300 " + kTrain + own_vocab_flags(builtin.path()) +
                       " --nproc-per-node 2");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string vocab = nmt::test::read_file(builtin.path() / "vocab" / "joint.model");
  REQUIRE_FALSE(vocab.empty());
  const std::string hash = parameter_hash(builtin.path(), 0);
  REQUIRE(hash.size() == 16);
  CHECK(parameter_hash(builtin.path(), 1) == hash);
  const auto same_as_builtin = [&](const std::string& launcher, const std::filesystem::path& run_dir,
                                   const std::string& command) {
    auto other = run_command(command);
    INFO(launcher << ": " << other.err);
    REQUIRE(other.exit_code == 0);
    CHECK(nmt::test::read_file(run_dir / "vocab" / "joint.model") == vocab);
    CHECK(parameter_hash(run_dir, 0) == hash);
    CHECK(parameter_hash(run_dir, 1) == hash);
  };
  const std::string torchrun = std::filesystem::path(kPython).parent_path() / "torchrun";
  TempDir under_torchrun, under_mpirun;
  std::string not_compared;  // the launchers missing here: the case ends skipped, naming them
  if (std::filesystem::exists(torchrun)) {
    same_as_builtin("torchrun", under_torchrun.path(),
                    "timeout 300 " + torchrun + " --nproc-per-node=2 --no-python " + kTrain +
                        own_vocab_flags(under_torchrun.path()));
  } else {
    not_compared = "torchrun (" + torchrun + " not found)";
  }
  if (run_command("command -v mpirun").exit_code == 0) {
    same_as_builtin("mpirun", under_mpirun.path(),
                    "timeout 300 mpirun -np 2 --allow-run-as-root --oversubscribe -x "
                    "MASTER_PORT=" + std::to_string(nmt::test::free_port()) + " " +
                        kTrain + own_vocab_flags(under_mpirun.path()));
  } else {
    not_compared += (not_compared.empty() ? "" : " and ") + std::string("mpirun (not installed)");
  }
  if (!not_compared.empty()) NMT_SKIP("not compared: " << not_compared);
}

TEST_CASE("SIGTERM to the launcher or to one rank stops every rank after the next update with a checkpoint",
          "[e2e][dist]") {
  // log_every larger than the run: the ranks must not wait for a log step to agree. The run
  // whose rank 1 is stopped shards its optimizer state (dist.sharding): the stop checkpoint
  // gathers it from both ranks.
  for (const std::string target : {"launcher", "rank 1"}) {
    INFO("SIGTERM to the " << target);
    TempDir run;
    const std::string sharding = target == "rank 1" ? " --set dist.sharding=optimizer" : "";
    const std::string args = exact_run_flags(run.path()) +
                             " --nproc-per-node 2 --set train.log_every=100000"
                             " --set checkpoint.every_steps=100000 --set train.max_steps=100000" +
                             sharding;
    // The signal goes out once the ranks have built their trainers and batches (the "steps
    // in epoch" line) and trained for 2 s more.
    const std::string pick = target == "launcher"
                                 ? "pid=$launcher"
                                 : "pid=$(pgrep -P $launcher | while read p; do "
                                   "tr '\\0' '\\n' < /proc/$p/environ | grep -qx RANK=1 && echo $p; "
                                   "done)";
    auto r = run_command(
        "(" + kTrain + args + " > " + (run.path() / "out.log").string() +
        " 2>&1 & launcher=$!; "
        "for i in $(seq 1 600); do grep -q 'steps in epoch' " +
        (run.path() / "out.log").string() + " 2>/dev/null && break; sleep 0.1; done; sleep 2; " +
        pick + "; start=$(date +%s.%N); kill -TERM $pid; wait $launcher; code=$?; "
        "echo exit=$code seconds=$(awk -v a=$start -v b=$(date +%s.%N) 'BEGIN { print b - a }'))");
    const std::string log = nmt::test::read_file(run.path() / "out.log");
    INFO(r.out << log);
    CHECK_THAT(r.out, Contains("exit=0"));
    const std::string summary = nmt::test::read_file(run.path() / "summary.json");
    REQUIRE_FALSE(summary.empty());
    CHECK(nmt::test::json_string(summary, "stop_reason") == "signal");
    const auto step = nmt::test::json_number(summary, "final_step");
    REQUIRE(step.has_value());
    CHECK(*step > 0);
    CHECK(*step < 100000);
    CHECK(std::filesystem::exists(checkpoint_path(run.path(), static_cast<int>(*step))));
    // Both replicas stopped at the same update with the same parameters.
    CHECK(parameter_hash(run.path(), 0) == parameter_hash(run.path(), 1));
    std::smatch m;
    REQUIRE(std::regex_search(r.out, m, std::regex("seconds=([0-9.]+)")));
    UNSCOPED_INFO("SIGTERM to " << target << ": exit after " << m[1] << " s at step " << *step);
    CHECK(std::stod(m[1]) < 60);
    if (sharding.empty()) continue;
    // The stop checkpoint holds the whole optimizer state: one process resumes from it.
    const auto resumed = run_command(kTrain + exact_run_flags(run.path()) +
                                     " --set data.update_freq=2 --set train.max_steps=" +
                                     std::to_string(static_cast<int>(*step) + 1));
    INFO(resumed.err);
    CHECK(resumed.exit_code == 0);
    CHECK_THAT(resumed.err, Contains("resum"));
  }
}

TEST_CASE("amp.mode auto with 2 CPU ranks: rank 0 decides, both train in its precision",
          "[e2e][dist]") {
  TempDir run;
  auto r = run_command("timeout 300 " + kTrain + exact_run_flags(run.path()) +
                       " --nproc-per-node 2 --set train.max_steps=4 --set amp.mode=auto");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("all 2 worker(s) exited with code 0"));
  const std::string summary = nmt::test::read_file(run.path() / "summary.json");
  INFO(summary);
  const std::optional<std::string> mode = nmt::test::json_string(summary, "mode");
  REQUIRE(mode.has_value());
  CHECK((*mode == "off" || *mode == "bf16"));
  CHECK_THAT(summary, Contains("\"auto\": true"));
  CHECK(nmt::test::json_number(summary, "final_step") == 4);
  // A rank in another precision would hash another config, and the ranks' agreement check
  // before the first update would have stopped the run ("ranks disagree"); the replicas end
  // equal.
  CHECK(r.err.find("ranks disagree") == std::string::npos);
  CHECK(parameter_hash(run.path(), 0).size() == 16);
  CHECK(parameter_hash(run.path(), 1) == parameter_hash(run.path(), 0));
  // Rank 0 says what it decided, for both.
  CHECK_THAT(r.err, Contains("[rank 0] ") && Contains("precision: " + *mode));
}
