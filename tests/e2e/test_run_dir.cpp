// End-to-end: one run per run directory, and the data a resumed launcher prepares. A second
// nmt-train on a live run's directory (a double submission, a requeue while the old job lives)
// is refused naming the holder, whether it would launch its own workers, run as one process,
// or run as torchrun's ranks, and the live run's checkpoints stay where they are. A resume
// after an edit of the YAML's data section encodes nothing: the launcher prepares the data of
// the config the workers run (the checkpoint's), not the YAML's.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "train_support.h"

using Catch::Matchers::Contains;
using nmt::test::checkpoint_path;
using nmt::test::count_lines_with;
using nmt::test::read_file;
using nmt::test::run_command;
using nmt::test::small_run_flags;
using nmt::test::TempDir;

namespace {

const std::string kTrain = nmt::test::kTrainBin;
const std::string kPython = NMT_PYTHON;

}  // namespace

TEST_CASE("a second nmt-train on a live run's directory is refused naming the holder",
          "[e2e][run_dir]") {
  // There was no lock: the second run (here --resume none) set the live run's checkpoints
  // aside, and both retentions deleted each other's files.
  TempDir run;
  const std::string flags = small_run_flags(run.path());
  const std::string torchrun = std::filesystem::path(kPython).parent_path() / "torchrun";
  const std::string out = (run.path() / "first.out").string();
  const auto at = [&run](const char* name) { return (run.path() / name).string(); };
  const std::string script =
      "timeout 300 " + kTrain + flags + " --nproc-per-node 2 --set train.max_steps=100000 > " +
      out + " 2>&1 & first=$!\n" + "for i in $(seq 1200); do [ -f " +
      checkpoint_path(run.path(), 4) +
      " ] && break; sleep 0.05; done\n"
      "timeout 120 " +
      kTrain + flags + " --resume none --nproc-per-node 2 > " + at("launcher.out") +
      " 2>&1; "
      "echo launcher_rc=$?\n"
      "timeout 120 " +
      kTrain + flags + " --resume none > " + at("single.out") + " 2>&1; echo single_rc=$?\n" +
      (std::filesystem::exists(torchrun)
           ? "timeout 120 " + torchrun +
                 " --nproc-per-node 2 --no-python --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:" +
                 std::to_string(nmt::test::free_port()) + " " + kTrain + flags +
                 " --resume none > " + at("torchrun.out") + " 2>&1; echo torchrun_rc=$?\n"
           : std::string("echo torchrun_rc=skipped\n")) +
      "ls " + (run.path() / "checkpoints").string() + " > " + at("listing.out") +
      "\n"
      "kill -TERM $first; wait $first; echo first_rc=$?\n";
  const auto r = run_command("bash " + run.write("second.sh", script).string());
  INFO(r.out << r.err << read_file(out));
  // The lock file still names the first run's launcher after it ended ("host H, pid P, ...").
  const std::string lock_text = read_file(run.path() / ".lock");
  const size_t pid_at = lock_text.find("pid ");
  REQUIRE(pid_at != std::string::npos);
  const std::string holder = lock_text.substr(pid_at, lock_text.find(',', pid_at) - pid_at);
  for (const std::string name : {"launcher", "single"}) {
    INFO(name);
    CHECK_THAT(r.out, Contains(name + "_rc=1"));
    const std::string text = read_file(run.path() / (name + ".out"));
    CHECK_THAT(text, Contains("in use by another nmt-train") && Contains(holder));
  }
  if (r.out.find("torchrun_rc=skipped") == std::string::npos) {
    CHECK_THAT(r.out, !Contains("torchrun_rc=0"));
    const std::string text = read_file(run.path() / "torchrun.out");
    CHECK_THAT(text, Contains("in use by another nmt-train") && Contains(holder));
    // Rank 1 stopped with rank 0's reason, not after dist.timeout_s in a collective.
    CHECK_THAT(text, Contains("rank 0 could not take the run directory"));
  } else {
    WARN("torchrun not found: its ranks were not tried");
  }
  // Nothing of the live run was set aside, and it ended as a SIGTERM'd run does.
  CHECK_THAT(read_file(run.path() / "listing.out"), !Contains("superseded"));
  CHECK_THAT(r.out, Contains("first_rc=0"));
}

TEST_CASE("a resume after an edit of the YAML's data section encodes nothing", "[e2e][run_dir]") {
  // The launcher prepared the data with the YAML's data.* while its workers took the
  // checkpoint's: two full encodings per resume, each deleting the other's cache.
  TempDir run;
  std::string yaml = read_file("configs/tiny.yaml");
  const auto config = run.write("run.yaml", yaml);
  std::string flags = small_run_flags(run.path());
  flags.replace(flags.find("configs/tiny.yaml"), std::string("configs/tiny.yaml").size(),
                config.string());
  const auto first =
      run_command("timeout 300 " + kTrain + flags + " --nproc-per-node 2 --set train.max_steps=4");
  REQUIRE(first.exit_code == 0);
  const std::filesystem::path phases = run.path() / "phases.jsonl";
  const int encodings = count_lines_with(read_file(phases), "\"phase\": \"encoding\"");
  CHECK(encodings >= 1);
  // One rank planned epoch 1, the other mapped its plan file (data/plan_file.h).
  CHECK(count_lines_with(read_file(phases), "\"plans_made\": 1") == 1);
  CHECK(count_lines_with(read_file(phases), "\"plans_made\": 0") == 1);
  yaml.replace(yaml.find("max_len: 128"), std::string("max_len: 128").size(), "max_len: 100");
  run.write("run.yaml", yaml);
  const auto resumed =
      run_command("timeout 300 " + kTrain + flags + " --nproc-per-node 2 --set train.max_steps=8");
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.err + resumed.out, Contains("resumed from"));
  CHECK(count_lines_with(read_file(phases), "\"phase\": \"encoding\"") == encodings);
}
