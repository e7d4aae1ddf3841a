// End-to-end: the real nmt-score binary, checked against the sacrebleu command line of the
// venv (NMT_PYTHON) where there is one.
#include <catch2/catch.hpp>
#include "skip.h"

#include <algorithm>
#include <filesystem>
#include <string>

#include "e2e_fixture.h"
#include "test_support.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nmt::test::check_one_error_line;
using nmt::test::run_command;
using nmt::test::TempDir;

namespace {

const std::string kBin = NMT_SCORE_BIN;

nmt::test::CommandResult score(const std::string& args) { return run_command(kBin + " " + args); }

bool have_sacrebleu() {
  const std::string python = NMT_PYTHON;
  return !python.empty() && std::filesystem::exists(python) &&
         run_command("'" + python + "' -c 'import sacrebleu' >/dev/null").exit_code == 0;
}

nmt::test::CommandResult sacrebleu(const std::string& args) {
  return run_command(std::string("'") + NMT_PYTHON + "' -m sacrebleu " + args);
}

const char* kHyp =
    "The cat sat on the mat.\n"
    "Hello &amp; welcome to Köln — it's 1,000.5 km away!\n"
    "\n"
    "短い文。\n"
    "Party 🎉\n";
const char* kRef1 =
    "The cat sat on a mat.\n"
    "Hello & welcome to Köln, it is 1,000.5 km away!\n"
    "Something.\n"
    "短い文です。\n"
    "Party 🎉!\n";
const char* kRef2 =
    "A cat was sitting on the mat.\n"
    "Hello and welcome to Cologne - 1,000.5 km away.\n"
    "\n"
    "短い文。\n"
    "Party!\n";

}  // namespace

TEST_CASE("nmt-score --help documents every flag and metric", "[e2e]") {
  const auto r = score("--help");
  CHECK(r.exit_code == 0);
  for (const char* word :
       {"-r,--refs", "-i,--input", "-m,--metrics", "--json", "--score-only", "--width", "bleu",
        "chrf++", "13a", "sacreBLEU 2.6.0", "stdin", "invalid UTF-8", "--version"}) {
    CHECK_THAT(r.out, Contains(word));
  }
  CHECK_THAT(r.out, Contains("exit code 1 (2 for a wrong command line, a file that does"));
  CHECK(score("").exit_code == 2);  // -r is required
  CHECK(score("-r /nonexistent/ref.txt").exit_code == 2);
}

TEST_CASE("nmt-score prints sacreBLEU's text and JSON, byte for byte", "[e2e][python]") {
  TempDir dir;
  const auto hyp = dir.write("hyp.txt", kHyp).string();
  const auto ref1 = dir.write("ref1.txt", kRef1).string();
  const auto ref2 = dir.write("ref2.txt", kRef2).string();

  const auto ours = score("-r " + ref1 + " -i " + hyp + " -m bleu chrf");
  INFO(ours.err);
  REQUIRE(ours.exit_code == 0);
  CHECK_THAT(ours.out,
             Contains("BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = "));
  CHECK_THAT(ours.out,
             Contains("chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0 = "));
  // stdin reads the same hypotheses.
  CHECK(score("-r " + ref1 + " -m bleu chrf < " + hyp).out == ours.out);

  if (!have_sacrebleu()) {
    // Our own output was checked above; the reason says what did not run.
    NMT_SKIP("the comparison with sacrebleu: no Python with sacrebleu (NMT_PYTHON='"
             << NMT_PYTHON << "')");
  }
  for (const std::string& refs : {ref1, ref1 + " " + ref2}) {
    INFO("refs: " << refs);
    CHECK(score("-r " + refs + " -i " + hyp + " -m bleu chrf").out ==
          sacrebleu(refs + " -i " + hyp + " -m bleu chrf -f text -w 2").out);
    CHECK(score("-r " + refs + " -i " + hyp + " -m chrf++").out ==
          sacrebleu(refs + " -i " + hyp + " -m chrf --chrf-word-order 2 -f text -w 2").out);
    CHECK(score("-r " + refs + " -i " + hyp + " -m bleu chrf --json -w 1").out ==
          sacrebleu(refs + " -i " + hyp + " -m bleu chrf -w 1").out);
    CHECK(score("-r " + refs + " -i " + hyp + " -m bleu chrf -b -w 4").out ==
          sacrebleu(refs + " -i " + hyp + " -m bleu chrf -f text -b -w 4").out);
  }
}

TEST_CASE("nmt-score scores a perfect match 100 and prints only scores with -b", "[e2e]") {
  TempDir dir;
  const auto ref = dir.write("ref.txt", kRef1).string();
  const auto r = score("-r " + ref + " -i " + ref + " -m chrf++ BLEU chrf -b");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "100.00\n100.00\n100.00\n");  // in the order bleu, chrf, chrf++
  CHECK(score("-r " + ref + " -i " + ref + " --json -b").exit_code != 0);  // exclusive
}

TEST_CASE("nmt-score reports bad input in one line naming the file", "[e2e]") {
  TempDir dir;
  const auto hyp = dir.write("hyp.txt", "one\ntwo\nthree\n").string();
  const auto ref = dir.write("ref.txt", "one\ntwo\n").string();
  check_one_error_line(
      "nmt-score", score("-r " + ref + " -i " + hyp),
      "line counts differ: hypotheses " + hyp + " has 3 lines, references " + ref + " has 2");
  const auto good = dir.write("good.txt", "one\ntwo\nthree\n").string();
  check_one_error_line("nmt-score", score("-r " + good + " " + ref + " -i " + hyp), ref + " has 2");
  const auto bad = dir.write("bad.txt", "fine\nbro\xc3\x28ken\nthree\n").string();
  check_one_error_line("nmt-score", score("-r " + good + " -i " + bad),
                       bad + ":2: invalid UTF-8 at byte 4");
  check_one_error_line("nmt-score", score("-r " + bad + " -i " + good), bad + ":2: invalid UTF-8");
  const auto empty = dir.write("empty.txt", "").string();
  check_one_error_line("nmt-score", score("-r " + empty + " -i " + empty), "no lines to score");
}
