// End-to-end reliability: damaged and foreign checkpoints, a disk that fills during a write,
// a stalled rank, a killed rank under --max-restarts and torchrun, and one table of malformed
// inputs that must each give one clear error line and leave existing output untouched.
#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <vector>

#include "train_support.h"

using Catch::Matchers::Contains;
using nmt::test::checkpoint_diff;
using nmt::test::checkpoint_path;
using nmt::test::count_lines_with;
using nmt::test::read_file;
using nmt::test::run_command;
using nmt::test::small_run_flags;
using nmt::test::TempDir;

namespace {

const std::string kTrain = nmt::test::kTrainBin;
const std::string kCkpt = nmt::test::kCkptBin;
const std::string kPython = NMT_PYTHON;

nmt::test::CommandResult train(const std::filesystem::path& run_dir, const std::string& extra) {
  return run_command("timeout 300 " + kTrain + small_run_flags(run_dir) + " " + extra);
}

/// Flips one byte of a file at `offset` (from the end when negative).
void flip_byte(const std::string& file, std::streamoff offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset, offset < 0 ? std::ios::end : std::ios::beg);
  const std::streamoff at = f.tellg();
  char c = 0;
  f.get(c);
  f.seekp(at);
  f.put(static_cast<char>(c ^ 0x5a));
}

/// The files of a folder tree with their contents, to show that nothing changed. Log files
/// are left out: a failed start may append its lines to them; and so is the run directory's
/// lock file, whose text names the last process that took the lock.
std::map<std::string, std::string> snapshot(const std::filesystem::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    const std::string name = std::filesystem::relative(entry.path(), dir).string();
    if (entry.is_regular_file() && name.rfind("logs/", 0) != 0 && name != ".lock")
      files[name] = read_file(entry.path());
  }
  return files;
}

}  // namespace

TEST_CASE("damaged, empty and foreign newest checkpoints are passed over for the newest good one",
          "[e2e][faults]") {
  static TempDir straight, other_model;
  static const bool prepared = [] {
    REQUIRE(train(straight.path(), "--set train.max_steps=12").exit_code == 0);
    REQUIRE(train(other_model.path(), "--set train.max_steps=8 --set model.ffn_dim=256").exit_code ==
            0);
    return true;
  }();
  REQUIRE(prepared);
  const std::vector<std::pair<std::string, std::function<void(const std::string&)>>> damages = {
      {"a flipped byte in the tensor data", [](const std::string& f) { flip_byte(f, -100); }},
      {"a flipped byte in the header", [](const std::string& f) { flip_byte(f, 40); }},
      {"an empty file", [](const std::string& f) { std::filesystem::resize_file(f, 0); }},
      {"text instead of a checkpoint",
       [](const std::string& f) { std::ofstream(f) << "not a checkpoint\n"; }},
      {"a checkpoint of another model",
       [](const std::string& f) {
         std::filesystem::copy_file(checkpoint_path(other_model.path(), 8), f,
                                    std::filesystem::copy_options::overwrite_existing);
       }},
  };
  for (const auto& [name, damage] : damages) {
    DYNAMIC_SECTION(name) {
      TempDir run;
      REQUIRE(train(run.path(), "--set train.max_steps=8").exit_code == 0);
      const std::string newest = checkpoint_path(run.path(), 8);
      damage(newest);
      auto r = train(run.path(), "--set train.max_steps=12");
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      CHECK(count_lines_with(r.err, "skipping " + newest) == 1);
      CHECK_THAT(r.err, Contains("resumed from " + checkpoint_path(run.path(), 4)));
      CHECK(checkpoint_diff(checkpoint_path(straight.path(), 12), checkpoint_path(run.path(), 12),
                            "0") == 0);
    }
  }
}

TEST_CASE("checkpoints that are all of another model stop the run instead of starting over",
          "[e2e][faults]") {
  TempDir run;
  REQUIRE(train(run.path(), "--set train.max_steps=4").exit_code == 0);
  const auto before = snapshot(run.path() / "checkpoints");
  auto r = train(run.path(), "--set train.max_steps=8 --set model.heads=2");
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("model.heads is 4 in the checkpoint but 2 in this run's config"));
  CHECK_THAT(r.err, Contains("no checkpoint in " + (run.path() / "checkpoints").string() +
                             " fits this run"));
  CHECK(snapshot(run.path() / "checkpoints") == before);
}

TEST_CASE("a checkpoint write that fails (file-size limit) keeps the previous checkpoint",
          "[e2e][faults]") {
  TempDir straight, run;
  REQUIRE(train(straight.path(), "--set train.max_steps=8").exit_code == 0);
  REQUIRE(train(run.path(), "--set train.max_steps=4").exit_code == 0);
  const auto before = snapshot(run.path() / "checkpoints");
  // ulimit -f is in KiB: the tiny model's checkpoint is several MiB, the logs far smaller.
  auto full = run_command("ulimit -f 2048; timeout 300 " + kTrain + small_run_flags(run.path()) +
                          " --set train.max_steps=8");
  INFO(full.err);
  CHECK(full.exit_code == 1);
  CHECK(count_lines_with(full.err, "nmt-train: error") == 1);
  CHECK_THAT(full.err, Contains(checkpoint_path(run.path(), 8) + ": cannot write"));
  CHECK_THAT(full.err, Contains("File too large; nothing was replaced"));
  CHECK(snapshot(run.path() / "checkpoints") == before);  // no temp file left behind either
  // With room again, the run resumes from the checkpoint it kept.
  auto again = train(run.path(), "--set train.max_steps=8");
  INFO(again.err);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.err, Contains("resumed from " + checkpoint_path(run.path(), 4)));
  CHECK(checkpoint_diff(checkpoint_path(straight.path(), 8), checkpoint_path(run.path(), 8), "0") ==
        0);
}

TEST_CASE("a stalled rank (SIGSTOP) makes the others fail within dist.timeout_s, saying where",
          "[e2e][faults]") {
  TempDir run;
  // Two ranks; once step 8 is logged, stop rank 1 and time the launcher's exit.
  const std::string script =
      "timeout 300 " + kTrain + small_run_flags(run.path()) +
      " --nproc-per-node 2 --set train.max_steps=100000 --set dist.timeout_s=5 > " +
      (run.path() / "out").string() +
      " 2>&1 & launcher=$!\n"
      "for i in $(seq 1200); do grep -q 'step 8/' " +
      (run.path() / "out").string() +
      " && break; sleep 0.1; done\n"
      "pid=$(grep -o 'pid [0-9]*' " + (run.path() / "logs" / "rank1.log").string() +
      " | head -n1 | cut -d' ' -f2)\n"
      "start=$(date +%s%N); kill -STOP $pid; wait $launcher; rc=$?; end=$(date +%s%N)\n"
      "echo rc=$rc milliseconds=$(( (end - start) / 1000000 ))\n";
  auto r = run_command("bash " + run.write("stall.sh", script).string());
  const std::string out = read_file(run.path() / "out");
  INFO(r.out << r.err << out);
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex("rc=([0-9]+) milliseconds=([0-9]+)")));
  CHECK(m[1] != "0");
  // The timeout, plus the seconds the launcher takes to stop the rest.
  CHECK(std::stol(m[2]) < 5000 + 10000);
  CHECK_THAT(out, Contains("nmt-train: error (rank 0): rank 0: "));
  CHECK_THAT(out, Contains("failed (timeout 5 s)"));
  // Where the ranks were: rank 1 behind, or every rank inside the collective.
  CHECK(std::regex_search(out, std::regex("behind: rank 1 is at '|so the hang is inside")));
}

TEST_CASE("a rank out of memory mid-backward: every rank skips that update, the run finishes",
          "[e2e][faults][oom]") {
  // NMT_FAULT_OOM (train/oom_skip.h) makes rank 1's update 3 throw what a failed CUDA
  // allocation throws, in the middle of its backward; rank 0 has launched its gradient buckets.
  TempDir run;
  auto r = run_command("NMT_FAULT_OOM=1:3:backward timeout 300 " + kTrain +
                       small_run_flags(run.path()) +
                       " --nproc-per-node 2 --set train.max_steps=8 --set dist.bucket_mb=0.05");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("step 3: out of memory in backward of a batch of"));
  CHECK_THAT(r.err, Contains("update 3 skipped by every rank: out of memory (rank 1: backward of "
                             "a batch of"));
  const std::string summary = read_file(run.path() / "summary.json");
  CHECK(nmt::test::json_number(summary, "final_step") == 8);
  CHECK(nmt::test::json_number(summary, "oom_skipped_updates") == 1);
  const std::vector<std::string> hashes = nmt::test::json_strings(summary, "parameter_hashes");
  REQUIRE(hashes.size() == 2);
  CHECK(hashes[0] == hashes[1]);  // the replicas stayed identical
  // The train records from step 4 on count it.
  int64_t counted = 0;
  for (const auto& record : nmt::test::json_values(read_file(run.path() / "metrics.jsonl")))
    if (record.value("type", "") == "train" && record.value("step", 0) >= 4)
      counted += record.value("oom_skipped_updates", 0) == 1 ? 1 : 0;
  CHECK(counted == 2);  // steps 4 and 8 (train.log_every 4)
}

TEST_CASE("a killed rank under --max-restarts 1 restarts from the last checkpoint and finishes",
          "[e2e][faults]") {
  const std::string torchrun = std::filesystem::path(kPython).parent_path() / "torchrun";
  TempDir straight;
  REQUIRE(train(straight.path(), "--nproc-per-node 2 --set train.max_steps=24").exit_code == 0);
  for (const std::string launcher : {"nmt-train", "torchrun"}) {
    if (launcher == "torchrun" && !std::filesystem::exists(torchrun)) {
      WARN("skipped torchrun: " << torchrun << " not found");
      continue;
    }
    DYNAMIC_SECTION(launcher) {
      TempDir run;
      const std::string command =
          launcher == "nmt-train"
              ? kTrain + small_run_flags(run.path()) + " --nproc-per-node 2 --max-restarts 1"
              : torchrun + " --nproc-per-node 2 --max-restarts 1 --no-python --rdzv-backend "
                           "c10d --rdzv-endpoint 127.0.0.1:" +
                    std::to_string(nmt::test::free_port()) + " " +
                    kTrain + small_run_flags(run.path());
      // Kill rank 1 once the step-8 checkpoint exists.
      const std::string script =
          "timeout 300 " + command + " --set train.max_steps=24 > " +
          (run.path() / "out").string() + " 2>&1 & launcher=$!\n" +
          "for i in $(seq 1200); do [ -f " + checkpoint_path(run.path(), 8) +
          " ] && break; sleep 0.05; done\n"
          "pid=$(grep -o 'pid [0-9]*' " + (run.path() / "logs" / "rank1.log").string() +
          " | head -n1 | cut -d' ' -f2)\n"
          "kill -9 $pid; wait $launcher; echo rc=$?\n";
      auto r = run_command("bash " + run.write("kill.sh", script).string());
      const std::string out = read_file(run.path() / "out");
      INFO(r.out << r.err << out);
      CHECK_THAT(r.out, Contains("rc=0"));
      CHECK_THAT(out, Contains("resumed from"));
      CHECK(checkpoint_diff(checkpoint_path(straight.path(), 24), checkpoint_path(run.path(), 24),
                            "0") == 0);
    }
  }
}

TEST_CASE("every malformed input gives one clear error line and leaves existing output alone",
          "[e2e][faults]") {
  TempDir run, files;
  REQUIRE(train(run.path(), "--set train.max_steps=4").exit_code == 0);
  const auto before = snapshot(run.path());
  const std::string yaml_dir = files.path().string();
  files.write("typo.yaml", "data:\n  max_tokns: 100\n");
  files.write("type.yaml", "data:\n  max_tokens: lots\n");
  files.write("broken.yaml", "data: {max_tokens: 100\n");
  files.write("src.txt", "one\ntwo\nthree\n");
  files.write("tgt.txt", "eins\nzwei\n");
  files.write("bad-utf8.txt", "one\ntw\xff\xfeo\nthree\n");
  files.write("three.txt", "eins\nzwei\ndrei\n");
  files.write("garbage.safetensors", "not a checkpoint");
  const std::string base = kTrain + small_run_flags(run.path()) + " --set train.max_steps=8 ";
  // Replaces the --config of `base` (the one on the tiny config) with another file.
  const auto with_config = [&](const std::string& file) {
    return kTrain + " --config " + file + " --set run_dir=" + run.path().string() +
           " --set train.max_steps=8";
  };
  struct Case {
    std::string name;
    std::string command;
    std::string expected;  // in the error line
  };
  const std::vector<Case> cases = {
      {"misspelled key", with_config(yaml_dir + "/typo.yaml"),
       "typo.yaml:2:3: unknown key 'data.max_tokns'; did you mean 'data.max_tokens'?"},
      {"wrong type", with_config(yaml_dir + "/type.yaml"),
       "type.yaml:2:15: data.max_tokens: expected an integer"},
      {"malformed YAML", with_config(yaml_dir + "/broken.yaml"), "broken.yaml:"},
      {"missing config file", with_config(yaml_dir + "/nope.yaml"), "config file not found"},
      {"--set without a value", base + "--set data.max_tokens", "expected key=value"},
      {"--set of an unknown key", base + "--set train.lr_max=1", "unknown key 'train.lr_max'"},
      {"missing corpus file", base + "--set data.train_src=" + yaml_dir + "/nope.en",
       "data.train_src: file not found"},
      {"corpus sides of different lengths",
       base + "--set data.train_src=" + yaml_dir + "/src.txt --set data.train_tgt=" + yaml_dir +
           "/tgt.txt",
       "3 lines"},
      {"invalid UTF-8 in the corpus",
       base + "--set data.train_src=" + yaml_dir + "/bad-utf8.txt --set data.train_tgt=" +
           yaml_dir + "/three.txt",
       "bad-utf8.txt:2"},
      {"checkpoint that is not one", base + "--resume " + yaml_dir + "/garbage.safetensors",
       "garbage.safetensors"},
      {"checkpoint that does not exist", base + "--resume " + yaml_dir + "/none.safetensors",
       "none.safetensors"},
      {"non-numeric worker count", base + "--nproc-per-node abc", "dist.nproc_per_node"},
      {"node rank beyond the nodes", base + "--nnodes 2 --node-rank 2",
       "--node-rank 2 is not below --nnodes 2"},
      {"NCCL without a GPU", base + "--set dist.backend=nccl",
       "dist.backend nccl needs CUDA devices"},
      {"RANK not below WORLD_SIZE",
       "RANK=5 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 " + base,
       "RANK=5 is not below WORLD_SIZE=2"},
      {"WORLD_SIZE not a number", "RANK=0 WORLD_SIZE=abc MASTER_ADDR=127.0.0.1 " + base,
       "WORLD_SIZE=abc"},
      {"MASTER_PORT out of range",
       "RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=99999 " + base,
       "MASTER_PORT=99999"},
      {"rendezvous port in use",
       kPython +
           " -c 'import socket,subprocess,sys; s=socket.socket(); s.bind((\"127.0.0.1\",0)); "
           "s.listen(); sys.exit(subprocess.call(sys.argv[1] + \" --master-port %d\" % "
           "s.getsockname()[1], shell=True))' '" +
           base + "--nproc-per-node 2 --set dist.timeout_s=10'",
       "already in use"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name) {
      auto r = run_command("timeout 120 " + std::string(c.command.rfind("RANK", 0) == 0 ? "env " : "") +
                           c.command);
      INFO(c.command << "\n" << r.err);
      CHECK(r.exit_code != 0);
      CHECK_THAT(r.err, Contains(c.expected));
      // One error line from the failing process (the launcher quotes a worker's once more).
      CHECK(count_lines_with(r.err, "nmt-train: error") >= 1);
      CHECK(count_lines_with(r.err, "nmt-train: error") <= 2);
      CHECK(snapshot(run.path()) == before);
    }
  }
}
