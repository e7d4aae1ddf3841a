// End-to-end: runs the real nmt-train binary from the source tree on the shipped configs.
#include <catch2/catch.hpp>

#include <algorithm>

#include "e2e_fixture.h"
#include "test_support.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nmt::test::check_one_error_line;
using nmt::test::run_command;

namespace {

const std::string kBin = NMT_TRAIN_BIN;

nmt::test::CommandResult train(const std::string& args) { return run_command(kBin + " " + args); }

}  // namespace

TEST_CASE("nmt-train --help documents every flag", "[e2e]") {
  auto r = train("--help");
  CHECK(r.exit_code == 0);
  for (const char* flag : {"--config", "--set", "--print-config", "--log-level",
                           "--nproc-per-node", "--version", "--help"}) {
    CHECK_THAT(r.out, Contains(flag));
  }
  CHECK_THAT(train("--version").out, StartsWith("0."));
  CHECK_THAT(r.out, Contains("exit code 1 (2 for a wrong command line)"));
}

TEST_CASE("nmt-train without --config is a usage error: exit code 2, as --help says", "[e2e]") {
  auto r = train("");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--config is required"));
  CHECK(train("--config configs/tiny.yaml --no-such-flag").exit_code == 2);
  CHECK(train("--config configs/tiny.yaml --nnodes 2 --node-rank 2").exit_code == 2);
}

TEST_CASE("nmt-train --config-reference prints the Markdown reference without a config", "[e2e]") {
  auto r = train("--config-reference");
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK_THAT(r.out, StartsWith("\n### Top level\n"));
  CHECK_THAT(r.out, Contains("| `data.max_tokens` | `4096` |"));
  CHECK_THAT(train("--help").out, Contains("--config-reference"));
}

TEST_CASE("printed config (--print-config) fed back prints the same config", "[e2e]") {
  nmt::test::TempDir dir;
  auto first = train("--config configs/tiny.yaml --set train.max_steps=77 --print-config");
  REQUIRE(first.exit_code == 0);
  CHECK(first.err.empty());
  CHECK_THAT(first.out, Contains("max_steps: 77"));
  const auto printed = dir.write("printed.yaml", first.out);
  auto second = train("--config " + printed.string() + " --print-config");
  REQUIRE(second.exit_code == 0);
  CHECK(second.out == first.out);
}

TEST_CASE("overrides (--set, and flags that name keys) win over the YAML", "[e2e]") {
  auto r = train("--config configs/tiny.yaml --set data.max_tokens=3000 --nproc-per-node 2 "
                 "--log-level warn --print-config");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("max_tokens: 3000"));
  CHECK_THAT(r.out, Contains("nproc_per_node: 2"));
  CHECK_THAT(r.out, Contains("level: warn"));
}

TEST_CASE("flags that take a path or a host take it as it is, not as YAML", "[e2e]") {
  // --init-from "runs/exp #2" became runs/exp (the rest read as a YAML comment), and
  // --init-from null no fine-tuning at all.
  auto r = train(
      "--config configs/tiny.yaml --init-from 'runs/exp #2' --master-addr 'null' "
      "--print-config");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("init_from: runs/exp #2") || Contains("init_from: \"runs/exp #2\"") ||
                        Contains("init_from: 'runs/exp #2'"));
  CHECK_THAT(r.out, Contains("master_addr: \"null\"") || Contains("master_addr: 'null'"));
}

TEST_CASE("config mistakes give one clear line naming file, line and key", "[e2e]") {
  nmt::test::TempDir dir;
  const auto bad_key = dir.write("bad_key.yaml", "data:\n  train_src: x\n  max_tokns: 5\n");
  check_one_error_line(
      "nmt-train", train("--config " + bad_key.string()),
      bad_key.string() + ":3:3: unknown key 'data.max_tokns'; did you mean 'data.max_tokens'?");
  const auto malformed = dir.write("malformed.yaml", "model: {d_model: 512\n");
  auto r = train("--config " + malformed.string());
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, StartsWith("nmt-train: error: " + malformed.string() + ":"));
  CHECK_THAT(r.err, Contains("malformed YAML"));
  check_one_error_line("nmt-train", train("--config configs/tiny.yaml --set data.max_tokens=lots"),
                       "--set data.max_tokens=lots: data.max_tokens: expected an integer >= 1 "
                       "or auto, found 'lots'");
  check_one_error_line("nmt-train", train("--config configs/tiny.yaml --nproc-per-node -3"),
                       "--set dist.nproc_per_node=-3: dist.nproc_per_node: expected an integer "
                       "in [0, 1024], found '-3' (out of range)");
  check_one_error_line("nmt-train", train("--config " + (dir.path() / "none.yaml").string()),
                       "config file not found: " + (dir.path() / "none.yaml").string());
}

TEST_CASE("a run logs its plan to the console and to the rank's log file", "[e2e]") {
  nmt::test::TempDir dir;
  // A sampling temperature with one corpus is valid, and warned about once.
  auto r = train("--config configs/tiny.yaml --set train.max_steps=2 --set data.vocab_size=500 "
                 "--set data.sampling_temperature=3 --set run_dir=" + dir.path().string() +
                 nmt::test::train_slice_flags());
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("[plan] LibTorch 2."));
  CHECK_THAT(r.err, Contains("[plan] model: 2+2 layers, d_model 128"));
  const std::string warning = "[config] --set data.sampling_temperature=3: "
                              "data.sampling_temperature 3 has no effect with one training corpus";
  const auto count = [](const std::string& text, const std::string& part) {
    size_t n = 0;
    for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
  };
  CHECK(count(r.err, warning) == 1);
  const std::string log = nmt::test::read_file(dir.path() / "logs" / "rank0.log");
  CHECK_THAT(log, Contains("[plan] run directory " + dir.path().string()));
  CHECK(count(log, warning) == 1);
}

TEST_CASE("ranks other than 0 log warnings and errors only, prefixed with the rank", "[e2e]") {
  nmt::test::TempDir dir;
  // Rank 1 of 2 with nobody to meet: its rendezvous fails, reported as one line with its rank.
  auto r = run_command("RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                       std::to_string(nmt::test::free_port()) + " " +
                       kBin + " --config configs/tiny.yaml --set dist.timeout_s=1 --set run_dir=" +
                       dir.path().string() + " --set data.sampling_temperature=3");
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("[plan] model") == std::string::npos);
  CHECK(r.err.find("sampling_temperature") == std::string::npos);  // rank 0's to warn about
  CHECK_THAT(r.err, StartsWith("nmt-train: error (rank 1): rank 1: cannot connect to the rendezvous store"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);  // LibTorch's own retry logs hidden
  // The rank's own file has everything from info up.
  CHECK_THAT(nmt::test::read_file(dir.path() / "logs" / "rank1.log"), Contains("[plan] model"));
  auto bad = run_command("RANK=x WORLD_SIZE=2 " + kBin + " --config configs/tiny.yaml");
  check_one_error_line("nmt-train", bad, "environment variable RANK=x: expected an integer >= 0");
}

TEST_CASE("dry run prepares the data and plans balanced batches for every rank", "[e2e]") {
  nmt::test::TempDir dir;
  // The first 18,000 pairs: a 4000-piece vocabulary on all 41,931 takes 2-3x as long.
  auto r = train("--config configs/tiny.yaml --dry-run --nproc-per-node 2 --set run_dir=" +
                 dir.path().string() + nmt::test::train_slice_flags());
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("padding efficiency"));
  CHECK_THAT(r.err, Contains("[data] train: 18000 pairs read"));
  // Training the vocabulary leaves no SentencePiece chatter ("... LOG(INFO) Running command").
  CHECK_THAT(r.err, Contains("training a 4000-piece SentencePiece"));
  CHECK_THAT(r.err, !Contains("LOG("));
  const std::string stats = nmt::test::read_file(dir.path() / "batch_stats.json");
  for (const char* key : {"\"batches\"", "\"sentences\"", "\"src_tokens\"", "\"tgt_tokens\"",
                          "\"padding_efficiency\"", "\"max_rank_token_imbalance\"", "\"naive\"",
                          "\"world_size\": 2"}) {
    CHECK_THAT(stats, Contains(key));
  }
  CHECK(std::filesystem::exists(dir.path() / "vocab" / "joint.model"));
  // A second run reuses vocabulary and token cache.
  auto again = train("--config configs/tiny.yaml --dry-run --nproc-per-node 2 --set run_dir=" +
                     dir.path().string() + nmt::test::train_slice_flags());
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.err, Contains("reusing vocabulary"));
  CHECK_THAT(again.err, Contains("token cache reused"));
  CHECK(again.out == r.out);  // the same plan
}
