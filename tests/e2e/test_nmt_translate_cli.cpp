// End-to-end: nmt-train trains a tiny checkpoint on the shipped corpus (once, shared by the
// cases of test_e2e_translate: translate_support.h), then nmt-translate translates files and
// stdin with it, as a checkpoint file and as a run directory.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <utility>

#include "test_support.h"
#include "translate_support.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nmt::test::lines_of;
using nmt::test::read_file;
using nmt::test::run_command;
using nmt::test::TempDir;

namespace {

const std::string kTranslate = NMT_TRANSLATE_BIN;

/// Runs nmt-translate with `args`; fails the test with its stderr when it fails.
std::string translate(const std::string& args) {
  const auto r = run_command(kTranslate + " --device cpu --log-level warn " + args);
  INFO("nmt-translate " << args << "\n" << r.err);
  REQUIRE(r.exit_code == 0);
  return r.out;
}

}  // namespace

TEST_CASE("nmt-translate translates with a checkpoint trained by nmt-train", "[e2e][translate]") {
  TempDir dir;
  const auto run_dir = nmt::test::translate_run_dir();
  const std::string checkpoint =
      (run_dir / "checkpoints" / "checkpoint-00000020.safetensors").string();

  // 12 test-set sentences with an empty line at 3 and a blank one at the end.
  std::ifstream test_set("data/ddtp.en-de.test.en");
  std::vector<std::string> input;
  for (std::string line; input.size() < 12 && std::getline(test_set, line);) input.push_back(line);
  input.insert(input.begin() + 2, "");
  input.push_back("  ");
  std::string text;
  for (const auto& line : input) text += line + "\n";
  const auto in_file = dir.write("in.en", text);
  const std::string in = in_file.string();
  const std::string out = (dir.path() / "out.de").string();

  // File in, file out; one output line per input line, empty lines preserved.
  CHECK(translate("--checkpoint " + checkpoint + " -i " + in + " -o " + out + " --beam 1").empty());
  const std::string greedy = read_file(out);
  const auto greedy_lines = lines_of(greedy);
  REQUIRE(greedy_lines.size() == input.size());
  CHECK(greedy_lines[2].empty());
  CHECK(greedy_lines.back().empty());

  // The uncached decoder gives the same output; the run directory means its last checkpoint
  // (no valid_loss); stdin/stdout work.
  CHECK(translate("-c " + checkpoint + " -i " + in + " --beam 1 --no-cache") == greedy);
  CHECK(translate("-c " + run_dir.string() + " --beam 1 < " + in) == greedy);

  const std::string beam = translate("-c " + run_dir.string() + " -i " + in + " --beam 4");
  CHECK(lines_of(beam).size() == input.size());
  CHECK(translate("-c " + run_dir.string() + " -i " + in + " --beam 4 --no-cache") == beam);
  CHECK(translate("-c " + run_dir.string() + " -i " + in + " --beam 4 --max-tokens 40") == beam);

  // n-best: N "text<TAB>score" lines per input line, scores descending within each.
  const auto nbest = lines_of(translate("-c " + checkpoint + " -i " + in + " --beam 4 --nbest 3"));
  REQUIRE(nbest.size() == 3 * input.size());
  for (size_t i = 0; i < input.size(); ++i) {
    double previous = 1;
    for (size_t k = 0; k < 3; ++k) {
      const std::string& line = nbest[3 * i + k];
      const size_t tab = line.rfind('\t');
      REQUIRE(tab != std::string::npos);
      const double score = std::stod(line.substr(tab + 1));
      CHECK(score <= previous);
      previous = score;
    }
    CHECK(nbest[3 * i].substr(0, nbest[3 * i].rfind('\t')) == lines_of(beam)[i]);
  }

  // Sampling: one line per input line; the same seed gives the same lines in any batching,
  // another seed other lines.
  const std::string sample = "-c " + checkpoint + " -i " + in + " --sampling topk:20,temperature:1.2";
  const std::string sampled = translate(sample + " --seed 3");
  CHECK(lines_of(sampled).size() == input.size());
  CHECK(lines_of(sampled)[2].empty());
  CHECK(translate(sample + " --seed 3") == sampled);
  // Another batching pads lines differently: the random numbers are the same, and a line
  // differs only where padding moved a draw's boundary by float rounding (test_sampling
  // checks that mechanism); on 14 lines, at most one may.
  const auto rebatched = lines_of(translate(sample + " --seed 3 --max-tokens 40"));
  REQUIRE(rebatched.size() == input.size());
  int same = 0;
  for (size_t i = 0; i < input.size(); ++i) same += rebatched[i] == lines_of(sampled)[i];
  CHECK(same >= int(input.size()) - 1);
  CHECK(translate(sample + " --seed 4") != sampled);
  CHECK(translate(sample + " --seed 3 --beam 1 --no-cache") == sampled);
  CHECK(translate("-c " + checkpoint + " -i " + in + " --sampling topk:1") == greedy);

  // Averaging the two checkpoints of the run.
  CHECK(lines_of(translate("-c " + run_dir.string() + " -i " + in + " --average 2 --beam 2"))
            .size() == input.size());

  // --stats-json: the run's figures for scripts.
  const auto stats = dir.path() / "stats.json";
  translate("-c " + checkpoint + " -i " + in + " --beam 1 --stats-json " + stats.string());
  const std::string json = read_file(stats);
  CHECK_THAT(json, Contains("\"sentences\": " + std::to_string(input.size())) &&
                       Contains("\"output_tokens_per_s\": ") && Contains("\"seconds\": ") &&
                       Contains("\"load_seconds\": "));

  // A stats file that cannot be written is an error naming it (it was a silent exit 0).
  const std::string unwritable = (dir.path() / "missing" / "stats.json").string();
  const auto no_stats = run_command(kTranslate + " --device cpu -c " + checkpoint + " -i " + in +
                                    " --beam 1 --stats-json " + unwritable);
  CHECK(no_stats.exit_code == 1);
  CHECK_THAT(no_stats.err, Contains("nmt-translate: error: ") && Contains(unwritable));

  // --tgt-lang is for a multilingual model: refused for this one in one line naming the flag.
  const auto tgt_lang = run_command(kTranslate + " --device cpu -c " + checkpoint + " -i " + in +
                                    " --tgt-lang de");
  CHECK(tgt_lang.exit_code == 1);
  CHECK(lines_of(tgt_lang.err).size() == 1);
  CHECK_THAT(tgt_lang.err, StartsWith("nmt-translate: error: --tgt-lang de: ") &&
                               Contains("is not a multilingual model"));

  // Invalid UTF-8: one error line naming file:line, exit code 1.
  const auto bad = dir.write("bad.en", "fine\n\n\xff\xfe\n");
  const auto r = run_command(kTranslate + " --device cpu -c " + checkpoint + " -i " + bad.string());
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("nmt-translate: error: " + bad.string() + ":3: invalid UTF-8"));
}

TEST_CASE("nmt-translate reports bad arguments in one line", "[e2e][translate]") {
  TempDir dir;
  const auto missing = run_command(kTranslate + " -c " + (dir.path() / "nope").string());
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.err, StartsWith("nmt-translate: error: "));
  CHECK_THAT(missing.err, Contains("no such checkpoint file or run directory"));
  CHECK(lines_of(missing.err).size() == 1);

  const auto nbest = run_command(kTranslate + " -c x --beam 2 --nbest 3");
  CHECK(nbest.exit_code == 2);
  CHECK_THAT(nbest.err, Contains("--nbest 3 exceeds --beam 2"));

  // Sampling: a bad spec, or n-best, beam > 1 or --seed alone, is one error naming the flag.
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--sampling topk:0", "--sampling topk:0: topk:K expects an integer K >= 1"},
           {"--sampling temperature:-1", "--sampling temperature:-1: temperature:T expects"},
           {"--sampling foo:3", "--sampling foo:3: unknown sampling 'foo:3'"},
           {"--sampling topk:5 --nbest 2", "--nbest and --sampling do not combine"},
           {"--sampling topk:5 --beam 4", "--beam 4 and --sampling do not combine"},
           {"--seed 3", "--seed requires --sampling"}}) {
    const auto r = run_command(kTranslate + " -c x " + args);
    INFO(args);
    CHECK(r.exit_code == 2);  // a wrong command line, as --help says
    CHECK_THAT(r.err, Contains(message));
  }

  const auto help = run_command(kTranslate + " --help");
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Contains("--no-cache"));
  CHECK_THAT(help.out, Contains("--sampling SPEC") && Contains("--seed N"));
  CHECK_THAT(help.out, Contains("exit code 1 (2 for a") && Contains("wrong command line)"));
}
