// Equality with the reference implementation: sacrebleu 2.6.0 (the venv's NMT_PYTHON) scores
// corpora written here, and our BLEU statistics must be identical and the scores equal to
// 1e-9 (so they print the same to 2 decimals). Skipped with a warning without that Python.
#include <catch2/catch.hpp>
#include "skip.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "eval/bleu.h"
#include "eval/chrf.h"
#include "eval/score_format.h"
#include "eval/text_file.h"
#include "test_support.h"

namespace {

using Lines = std::vector<std::string>;

/// One corpus: hypotheses and one or two reference streams.
struct Case {
  std::string name;
  Lines hyps;
  std::vector<Lines> refs;
};

std::vector<Case> cases() {
  return {
      {"punctuation and numbers",
       {"The price rose to $1,000.5 \"yesterday\" -- said Smith & Co.",
        "It's a well-known fact: e-mail (electronic mail) isn't new...",
        "Tom &amp; Jerry &quot;met&quot; at 10-11 a.m.", "Dashes – and — differ; 3-4 vs. 3 - 4.",
        "U.S. sales grew 2.5% in 2019/2020."},
       {{"The price rose to $1,000.50 yesterday, said Smith &amp; Co.",
         "It is a well-known fact that e-mail (electronic mail) is not new.",
         "Tom & Jerry \"met\" at 10-11 a.m.", "Dashes – and — differ; 3-4 vs 3 - 4.",
         "US sales grew 2.5 % in 2019 / 2020."}}},
      {"unicode",
       {"Grüße aus München! Die Straße ist schön.", "我们今天去北京。", "Party tonight 🎉😀!",
        "naïve café — déjà vu", "Ελληνικά και русский текст"},
       {{"Grüße aus München, die Straße ist sehr schön.", "我们明天去北京。", "Party tonight 🎉!",
         "naive cafe — deja vu", "Ελληνικά και русский текст."}}},
      {"empty lines",
       {"", "a sentence here .", "", "another one", "nothing matches"},
       {{"", "a sentence here.", "not empty", "", "at all here"}}},
      {"perfect match",
       {"The cat sat on the mat.", "Dogs bark; cats meow.", "Is this 100% right?"},
       {{"The cat sat on the mat.", "Dogs bark; cats meow.", "Is this 100% right?"}}},
      {"total mismatch",
       {"alpha beta gamma delta", "epsilon zeta"},
       {{"one two three four five", "six seven eight"}}},
      {"very short hypotheses",
       {"The", "A cat", "Yes."},
       {{"The quick brown fox jumps over the lazy dog.", "A cat sat on the mat today.",
         "Yes, of course it is."}}},
      {"two reference streams",
       {"The cat is on the mat.", "There is a cat on the mat.", "Hello world", "Guten Tag!"},
       {{"The cat is on the mat.", "A cat sits on the mat.", "Hello, world!", "Guten Morgen!"},
        {"There is a cat on the mat.", "The cat is on the mat.", "hello world", "Guten Tag."}}},
      {"whitespace and escapes",
       {"  spaced\tout   words  ", "&lt;tag&gt; &amp;amp; <skipped>", "trailing period .",
        "non\u00a0breaking\u3000space"},
       {{"spaced out words", "<tag> &amp; ", "trailing period.", "non breaking space"}}},
  };
}

/// Writes lines with '\n' after each, as a translation file.
std::filesystem::path write_lines(const nmt::test::TempDir& dir, const std::string& name,
                                  const Lines& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return dir.write(name, text);
}

constexpr const char* kScript = R"(
import sys
from sacrebleu.metrics import BLEU, CHRF
def read(path):
    with open(path, encoding='utf-8', newline='\n') as f:
        return [line.rstrip() for line in f]
hyps = read(sys.argv[1])
refs = [read(p) for p in sys.argv[2:]]
b = BLEU().corpus_score(hyps, refs)
c = CHRF().corpus_score(hyps, refs)
cpp = CHRF(word_order=2).corpus_score(hyps, refs)
print(repr(b.score), b.sys_len, b.ref_len, *b.counts, *b.totals, repr(c.score), repr(cpp.score))
)";

/// sacrebleu's numbers for one case, or empty when Python/sacrebleu is unavailable.
std::string sacrebleu_numbers(const std::string& python, const nmt::test::TempDir& dir,
                              const std::filesystem::path& hyp,
                              const std::vector<std::filesystem::path>& refs) {
  const auto script = dir.write("score.py", kScript);
  std::string command = "'" + python + "' '" + script.string() + "' '" + hyp.string() + "'";
  for (const auto& ref : refs) command += " '" + ref.string() + "'";
  const auto result = nmt::test::run_command(command);
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  return result.out;
}

}  // namespace

TEST_CASE("BLEU, chrF and chrF++ equal sacrebleu 2.6.0 on varied corpora", "[eval][python]") {
  const std::string python = NMT_PYTHON;
  if (python.empty() || !std::filesystem::exists(python) ||
      nmt::test::run_command("'" + python + "' -c 'import sacrebleu' >/dev/null").exit_code != 0) {
    NMT_SKIP("no Python with sacrebleu (NMT_PYTHON='" << python << "')");
  }
  for (const Case& c : cases()) {
    SECTION(c.name) {
      nmt::test::TempDir dir;
      const auto hyp_file = write_lines(dir, "hyp.txt", c.hyps);
      std::vector<std::filesystem::path> ref_files;
      for (size_t k = 0; k < c.refs.size(); ++k)
        ref_files.push_back(write_lines(dir, "ref" + std::to_string(k) + ".txt", c.refs[k]));
      std::istringstream expected(sacrebleu_numbers(python, dir, hyp_file, ref_files));
      double bleu, chrf, chrfpp;
      int64_t sys_len, ref_len;
      std::array<int64_t, 4> counts, totals;
      expected >> bleu >> sys_len >> ref_len;
      for (auto& x : counts) expected >> x;
      for (auto& x : totals) expected >> x;
      expected >> chrf >> chrfpp;
      REQUIRE(expected);

      // Read back the files as nmt-score does (line splitting, rstrip).
      const Lines hyps = nmt::eval::read_text_file(hyp_file.string());
      std::vector<Lines> refs;
      for (const auto& f : ref_files) refs.push_back(nmt::eval::read_text_file(f.string()));
      const auto b = nmt::eval::corpus_bleu(hyps, refs);
      const auto ch = nmt::eval::corpus_chrf(hyps, refs);
      const auto chpp = nmt::eval::corpus_chrf(hyps, refs, 2);
      CHECK(b.sys_len == sys_len);
      CHECK(b.ref_len == ref_len);
      CHECK(b.counts == counts);
      CHECK(b.totals == totals);
      CHECK(std::abs(b.score - bleu) < 1e-9);
      CHECK(std::abs(ch.score - chrf) < 1e-9);
      CHECK(std::abs(chpp.score - chrfpp) < 1e-9);
      CHECK(nmt::eval::format_fixed(b.score, 2) == nmt::eval::format_fixed(bleu, 2));
      CHECK(nmt::eval::format_fixed(ch.score, 2) == nmt::eval::format_fixed(chrf, 2));
      CHECK(nmt::eval::format_fixed(chpp.score, 2) == nmt::eval::format_fixed(chrfpp, 2));
      const double largest_diff = std::max(
          {std::abs(b.score - bleu), std::abs(ch.score - chrf), std::abs(chpp.score - chrfpp)});
      if (largest_diff > 0) WARN(c.name << ": largest difference to sacrebleu " << largest_diff);
      if (c.name == "perfect match") CHECK(bleu == Approx(100.0));
      if (c.name == "total mismatch") CHECK(bleu == 0.0);
      if (c.name == "very short hypotheses") CHECK(b.bp < 0.1);
    }
  }
}
