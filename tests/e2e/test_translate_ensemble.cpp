// End-to-end: nmt-translate -c A -c B decodes with an ensemble (decode/ensemble.h) of the two
// checkpoints of the shared tiny run (translate_support.h, steps 10 and 20): a checkpoint with
// itself writes the file of the checkpoint alone; two checkpoints write other lines, and their
// --score per pair is the weighted mean of each one's; a corpus on 2 workers writes the file of
// one process, and its manifest refuses a resume with other checkpoints or weights.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.h"
#include "translate_support.h"

using Catch::Matchers::Contains;
using nmt::test::lines_of;
using nmt::test::read_file;
using nmt::test::run_command;
using nmt::test::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kTranslate = NMT_TRANSLATE_BIN;
constexpr int kLines = 23;

/// The shared run's checkpoint at `step` (10 or 20).
std::string checkpoint_at(int step) {
  return (nmt::test::translate_run_dir() / "checkpoints" /
          ("checkpoint-000000" + std::to_string(step) + ".safetensors"))
      .string();
}

/// The first kLines lines of a shipped file, written into dir as `name`.
fs::path head_of(const TempDir& dir, const std::string& shipped, const std::string& name) {
  std::ifstream in(shipped);
  std::string text, line;
  for (int n = 0; n < kLines && std::getline(in, line); ++n) text += line + "\n";
  return dir.write(name, text);
}

/// nmt-translate on the CPU, outputs cut at 16 tokens (the tiny model's run on otherwise).
nmt::test::CommandResult translate(const std::string& args, const std::string& env = "") {
  return run_command(env + " " + kTranslate +
                     " --device cpu --log-level warn --max-len-a 0 --max-len-b 16 " + args);
}

/// Runs it, requires success and returns the file it wrote.
std::string translate_to(const std::string& args, const fs::path& out) {
  const auto r = translate(args + " -o " + out.string());
  INFO("nmt-translate " << args << "\n" << r.err);
  REQUIRE(r.exit_code == 0);
  return read_file(out);
}

/// The SUM column of --score's lines.
std::vector<double> sums_of(const std::string& text) {
  std::vector<double> out;
  for (const std::string& line : lines_of(text)) out.push_back(std::stod(line));
  return out;
}

}  // namespace

TEST_CASE("an ensemble of a checkpoint with itself writes the file of the checkpoint alone",
          "[e2e][translate][ensemble]") {
  const std::string c20 = checkpoint_at(20);
  TempDir dir;
  const std::string in = head_of(dir, "data/ddtp.en-de.test.en", "in.en").string();
  const fs::path out = dir.path() / "out";
  // Beam search's best is the n-best list's first line: greedy and n-best cover the searches.
  for (const std::string mode : {"--beam 1", "--beam 4 --nbest 2"}) {
    INFO(mode);
    const std::string alone = translate_to("-c " + c20 + " -i " + in + " " + mode, out);
    CHECK(translate_to("-c " + c20 + " -c " + c20 + " -i " + in + " " + mode, out) == alone);
  }
}

TEST_CASE("an ensemble's --score per pair is the weighted mean of its checkpoints' scores",
          "[e2e][translate][ensemble]") {
  const std::string c10 = checkpoint_at(10), c20 = checkpoint_at(20);
  TempDir dir;
  const std::string src = head_of(dir, "data/ddtp.en-de.test.en", "in.en").string();
  const std::string tgt = head_of(dir, "data/ddtp.en-de.test.de", "in.de").string();
  const fs::path out = dir.path() / "out";
  const std::string pairs = " -i " + src + " --score " + tgt;
  const std::vector<double> s10 = sums_of(translate_to("-c " + c10 + pairs, out));
  const std::vector<double> s20 = sums_of(translate_to("-c " + c20 + pairs, out));
  const std::vector<double> mean = sums_of(translate_to("-c " + c10 + " -c " + c20 + pairs, out));
  const std::vector<double> weighted =
      sums_of(translate_to("-c " + c10 + " -c " + c20 + " --ensemble-weights 3 1" + pairs, out));
  REQUIRE(s10.size() == size_t(kLines));
  REQUIRE(mean.size() == size_t(kLines));
  REQUIRE(weighted.size() == size_t(kLines));
  for (int i = 0; i < kLines; ++i) {
    INFO("pair " << i);
    // Each model scores the pairs in the batches it scores them in alone: the weighted mean
    // to double rounding, printed with 6 decimals.
    CHECK(mean[i] == Approx(0.5 * s10[i] + 0.5 * s20[i]).epsilon(1e-5));
    CHECK(weighted[i] == Approx(0.75 * s10[i] + 0.25 * s20[i]).epsilon(1e-5));
  }
  CHECK(s10 != s20);

  // The ensemble's translations are neither checkpoint's.
  const std::string in = " -i " + src + " --beam 1";
  const std::string both = translate_to("-c " + c10 + " -c " + c20 + in, out);
  CHECK(both != translate_to("-c " + c10 + in, out));
  CHECK(both != translate_to("-c " + c20 + in, out));
}

TEST_CASE("an ensemble decodes a corpus on 2 workers, and resumes only with its checkpoints",
          "[e2e][translate][ensemble]") {
  const std::string c10 = checkpoint_at(10), c20 = checkpoint_at(20);
  TempDir dir;
  const std::string in = head_of(dir, "data/ddtp.en-de.test.en", "in.en").string();
  const std::string both = "-c " + c10 + " -c " + c20 + " -i " + in + " --shard-lines 5";
  const std::string one = translate_to(both + " --beam 2", dir.path() / "one");
  CHECK(translate_to(both + " --beam 2 --nproc-per-node 2", dir.path() / "two") == one);
  CHECK(lines_of(one).size() == size_t(kLines));

  // Rank 0 dies after its first shard; a resume with the checkpoints in the other order or
  // with other weights is refused, naming what differs; with the same ones it ends the file.
  const fs::path out = dir.path() / "out";
  const std::string corpus =
      " -i " + in + " --shard-lines 5 --beam 2 --nproc-per-node 2 -o " + out.string();
  const auto killed = translate(both + " --beam 2 --nproc-per-node 2 -o " + out.string(),
                                "NMT_TRANSLATE_TEST_KILL_AFTER=0:1");
  REQUIRE(killed.exit_code != 0);
  REQUIRE(fs::exists(out.string() + ".parts"));
  for (const auto& [args, differs] : std::vector<std::pair<std::string, std::string>>{
           {"-c " + c20 + " -c " + c10, "(model0_checkpoint, model1_checkpoint differ)"},
           {"-c " + c10 + " -c " + c20 + " --ensemble-weights 3 1",
            "(ensemble_weights differs)"}}) {
    const auto refused = translate(args + corpus);
    INFO(args << "\n" << refused.err);
    CHECK(refused.exit_code == 1);
    CHECK_THAT(refused.err, Contains(differs) && Contains("--force"));
  }
  const auto resumed = translate(both + " --beam 2 --nproc-per-node 2 -o " + out.string());
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(read_file(out) == one);
  CHECK_FALSE(fs::exists(out.string() + ".parts"));
}

TEST_CASE("nmt-translate --ensemble-weights needs one weight per -c, each > 0",
          "[e2e][translate][ensemble]") {
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"-c a -c b --ensemble-weights 1 2 3",
            "--ensemble-weights gives 3 weights for 2 checkpoints (-c): give one per -c"},
           {"-c a -c b --ensemble-weights 1 0", "--ensemble-weights"}}) {
    const auto r = run_command(kTranslate + " " + args);
    INFO(args << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(message));
  }
  const auto help = run_command(kTranslate + " --help");
  CHECK_THAT(help.out, Contains("--ensemble-weights W...") && Contains("-c A -c B"));
}
