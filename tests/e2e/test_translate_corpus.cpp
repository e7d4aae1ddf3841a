// End-to-end: nmt-translate --nproc-per-node decodes a corpus on two CPU workers into the file
// one process writes, and a run killed part-way resumes to the same file, decoding only the
// shards that were missing (decode/corpus_translation.h).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "translate_support.h"
#include "util/file_lock.h"

using Catch::Matchers::Contains;
using nmt::test::lines_of;
using nmt::test::read_file;
using nmt::test::run_command;
using nmt::test::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kTranslate = NMT_TRANSLATE_BIN;
/// Input lines of the corpus, and lines per shard: 5 shards, the last one short.
constexpr int kLines = 23;
constexpr int kShardLines = 5;
constexpr int kShards = (kLines + kShardLines - 1) / kShardLines;

/// The shared tiny run's last checkpoint (translate_support.h).
std::string corpus_checkpoint() {
  return (nmt::test::translate_run_dir() / "checkpoints" / "checkpoint-00000020.safetensors")
      .string();
}

/// kLines lines of the shipped test set, with an empty line at 3.
fs::path corpus(const TempDir& dir) {
  std::ifstream test_set("data/ddtp.en-de.test.en");
  std::string text;
  int n = 0;
  for (std::string line; n < kLines - 1 && std::getline(test_set, line); ++n) {
    if (n == 2) text += "\n";
    text += line + "\n";
  }
  return dir.write("in.en", text);
}

/// nmt-translate on the CPU with `args`; returns its result. Outputs are cut at 16 tokens: the
/// tiny model's run on to the longest otherwise, which is most of the time.
nmt::test::CommandResult translate(const std::string& args, const std::string& env = "") {
  return run_command(env + " " + kTranslate +
                     " --device cpu --log-level warn --max-len-a 0 --max-len-b 16 " + args);
}

/// Runs it and requires success.
void translate_ok(const std::string& args) {
  const auto r = translate(args);
  INFO("nmt-translate " << args << "\n" << r.err);
  REQUIRE(r.exit_code == 0);
}

int shards_kept(const fs::path& output) {
  int n = 0;
  for (int i = 0; i < kShards; ++i)
    n += fs::exists(fs::path(output.string() + ".parts") /
                    ("shard-0000000" + std::to_string(i) + ".txt"));
  return n;
}

}  // namespace

TEST_CASE("nmt-translate --nproc-per-node 2 writes the file of one process", "[e2e][translate]") {
  const std::string checkpoint = corpus_checkpoint();
  TempDir dir;
  const std::string in = corpus(dir).string();
  const std::string base =
      "-c " + checkpoint + " -i " + in + " --shard-lines " + std::to_string(kShardLines);
  for (const std::string mode :
       {"--beam 1", "--beam 4", "--beam 4 --nbest 2", "--sampling topk:10 --seed 3"}) {
    INFO(mode);
    const fs::path one = dir.path() / "one.de";
    const fs::path two = dir.path() / "two.de";
    const fs::path stats = dir.path() / "stats.json";
    // Scores and draws are the same to the last digit only from the same batches on as many
    // threads: the n-best and sampling outputs are compared with one process decoding the
    // same shards on one thread, as each worker does.
    const bool same_batches = mode.find("--beam 4 --nbest") != std::string::npos ||
                              mode.find("sampling") != std::string::npos;
    const std::string threads = same_batches ? " --threads 1" : "";
    translate_ok(base + " " + mode + threads + " -o " + one.string() +
                 (same_batches ? " --nproc-per-node 1" : ""));
    translate_ok(base + " " + mode + threads + " -o " + two.string() +
                 " --nproc-per-node 2 --stats-json " + stats.string());
    CHECK(read_file(two) == read_file(one));
    CHECK(lines_of(read_file(two)).size() ==
          size_t(kLines) * (mode.find("nbest") != std::string::npos ? 2 : 1));
    CHECK_FALSE(fs::exists(two.string() + ".parts"));
    const auto o = nlohmann::json::parse(read_file(stats));
    CHECK(o["lines"] == kLines);
    CHECK(o["shards"] == kShards);
    CHECK(o["shards_decoded"] == kShards);
    CHECK(o["sentences"] == kLines);
    CHECK(o["ranks"].size() >= 1);
  }
}

/// The shipped test set (1,000 lines) then its first 200 lines again: 1,200 lines.
fs::path corpus_1200(const TempDir& dir) {
  std::ifstream test_set("data/ddtp.en-de.test.en");
  std::string text, first_lines;
  int n = 0;
  for (std::string line; std::getline(test_set, line); ++n) {
    text += line + "\n";
    if (n < 200) first_lines += line + "\n";
  }
  REQUIRE(n == 1000);
  return dir.write("in.en", text + first_lines);
}

TEST_CASE("every worker decodes a corpus smaller than the former 10,000-line shard",
          "[e2e][translate]") {
  // All 1,200 lines were one shard, which rank 0 decoded while rank 1 idled.
  TempDir dir;
  const std::string base = "-c " + corpus_checkpoint() + " -i " + corpus_1200(dir).string();
  const fs::path one = dir.path() / "one.de";
  const fs::path two = dir.path() / "two.de";
  const fs::path stats = dir.path() / "stats.json";
  translate_ok(base + " --nproc-per-node 1 -o " + one.string());
  translate_ok(base + " --nproc-per-node 2 --stats-json " + stats.string() + " -o " + two.string());
  CHECK(read_file(two) == read_file(one));
  const auto o = nlohmann::json::parse(read_file(stats));
  CHECK(o["lines"] == 1200);
  CHECK(o["shards"] == 2);  // one of 600 lines per worker
  REQUIRE(o["ranks"].size() == 2);
  CHECK(o["ranks"][0]["sentences"] == 600);
  CHECK(o["ranks"][1]["sentences"] == 600);
}

TEST_CASE("a corpus run resumes on another number of workers with its shards", "[e2e][translate]") {
  TempDir dir;
  const std::string base = "-c " + corpus_checkpoint() + " -i " + corpus_1200(dir).string();
  const fs::path whole = dir.path() / "whole.de";
  translate_ok(base + " -o " + whole.string());
  // Started on 2 workers (2 shards of 600 lines), rank 0 killed once it kept its shard, then
  // resumed on 1, whose own size would be one shard of 1,200 lines.
  const fs::path out = dir.path() / "out.de";
  const auto killed = translate(base + " --nproc-per-node 2 -o " + out.string(),
                                "NMT_TRANSLATE_TEST_KILL_AFTER=0:1");
  INFO(killed.err);
  REQUIRE(killed.exit_code != 0);
  REQUIRE(fs::exists(fs::path(out.string() + ".parts") / "shard-00000000.txt"));
  const fs::path stats = dir.path() / "stats.json";
  translate_ok(base + " --nproc-per-node 1 --stats-json " + stats.string() + " -o " + out.string());
  CHECK(read_file(out) == read_file(whole));
  const auto o = nlohmann::json::parse(read_file(stats));
  CHECK(o["shards"] == 2);
  CHECK(o["shards_resumed"].get<int>() >= 1);
}

TEST_CASE("a corpus run killed part-way resumes to the same file", "[e2e][translate]") {
  const std::string checkpoint = corpus_checkpoint();
  TempDir dir;
  const std::string in = corpus(dir).string();
  const std::string base =
      "-c " + checkpoint + " -i " + in + " --shard-lines " + std::to_string(kShardLines);
  const fs::path whole = dir.path() / "whole.de";
  translate_ok(base + " --beam 2 -o " + whole.string());

  // Rank 0 dies (SIGKILL, as a lost node) once it has kept a shard; the launcher stops rank 1.
  const fs::path out = dir.path() / "out.de";
  const std::string to_out = base + " -o " + out.string() + " --nproc-per-node 2";
  const std::string args = to_out + " --beam 2";
  const fs::path parts = out.string() + ".parts";
  const auto killed = translate(args, "NMT_TRANSLATE_TEST_KILL_AFTER=0:1");
  INFO(killed.err);
  REQUIRE(killed.exit_code != 0);
  CHECK_FALSE(fs::exists(out));
  const int kept = shards_kept(out);
  REQUIRE(kept >= 1);
  REQUIRE(kept < kShards);
  // What a rank killed while writing a shard leaves: its temp file.
  std::ofstream(parts / "shard-00000005.txt.tmp-2147480000") << "half a shard";

  // Another option is refused, naming it; a live run on the same output refuses a second.
  const auto other = translate(to_out + " --beam 3");
  CHECK(other.exit_code == 1);
  CHECK_THAT(other.err, Contains("(beam differs)") && Contains("--force"));
  {
    const nmt::FileLock live = nmt::FileLock::try_lock(parts / ".lock");
    REQUIRE(live.held());
    const auto second = translate(args);
    CHECK(second.exit_code == 1);
    CHECK_THAT(second.err, Contains("another nmt-translate is decoding into it"));
  }

  // Started again with the same arguments: only the missing shards, the same file, no folder.
  const fs::path stats = dir.path() / "stats.json";
  translate_ok(args + " --stats-json " + stats.string());
  CHECK(read_file(out) == read_file(whole));
  CHECK_FALSE(fs::exists(parts));
  const auto o = nlohmann::json::parse(read_file(stats));
  CHECK(o["shards"] == kShards);
  CHECK(o["shards_resumed"] == kept);
  CHECK(o["shards_decoded"] == kShards - kept);
  CHECK(o["sentences"] < kLines);
}

TEST_CASE("nmt-translate --nproc-per-node needs an input and an output file", "[e2e][translate]") {
  const auto r = run_command("echo hello | " + kTranslate +
                             " --device cpu -c /nonexistent.safetensors --nproc-per-node 2 -o x");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("not stdin"));
}
