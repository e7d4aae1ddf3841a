// chrF and chrF++ on tiny inputs.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "eval/chrf.h"
#include "eval/score_format.h"
#include "util/error.h"

using nmt::eval::corpus_chrf;
using Lines = std::vector<std::string>;

TEST_CASE("chrF of a perfect match is 100, of disjoint characters 0", "[eval]") {
  const Lines text = {"Grüße aus Köln, 中文 😀!", "short"};
  CHECK(corpus_chrf(text, {text}).score == Approx(100.0).epsilon(1e-12));
  CHECK(corpus_chrf(text, {text}, 2).score == Approx(100.0).epsilon(1e-12));
  CHECK(corpus_chrf({"abc"}, {{"xyz"}}).score == 0.0);
  // Whitespace does not count: only the spacing differs.
  CHECK(corpus_chrf({"a b  c"}, {{"abc"}}).score == Approx(100.0).epsilon(1e-12));
}

TEST_CASE("chrF counts code points, not bytes", "[eval]") {
  // "äb" and "äc" have two 1-grams each (not three, as bytes) and share one: ä.
  const auto r = nmt::eval::chrf_stats({"äb"}, {{"äc"}});
  REQUIRE(r.stats.size() == 18);
  CHECK(r.stats[0] == 2);  // hyp 1-grams
  CHECK(r.stats[1] == 2);  // ref 1-grams
  CHECK(r.stats[2] == 1);  // matches
  CHECK(r.stats[3] == 1);  // hyp 2-grams
  CHECK(r.stats[6] == 0);  // 3-grams: the reference has none, so hyp counts as 0 too
}

TEST_CASE("chrF averages precision and recall over the orders present", "[eval]") {
  // hyp "ab", ref "abc": order 1: P 2/2, R 2/3; order 2: P 1/1, R 1/2; higher orders absent
  // in the hypothesis. avgP = 1, avgR = 7/12; F2 = 5PR / (4P + R).
  const double p = 1.0, rec = (2.0 / 3 + 0.5) / 2;
  CHECK(corpus_chrf({"ab"}, {{"abc"}}).score == Approx(100 * 5 * p * rec / (4 * p + rec)));
}

TEST_CASE("chrF++ adds word n-grams after splitting off edge punctuation", "[eval]") {
  const auto r = nmt::eval::chrf_stats({"(hi) there."}, {{"(hi) there ."}}, 2);
  REQUIRE(r.stats.size() == 24);
  // Words: "(hi" ")" "there" "." on both sides ('(hi)' splits as '(hi' + ')', sacrebleu #124).
  CHECK(r.stats[18] == 4);
  CHECK(r.stats[20] == 4);
  CHECK(r.stats[21] == 3);  // word bigrams
  CHECK(r.stats[23] == 3);
}

TEST_CASE("chrF picks the reference with the best sentence F score", "[eval]") {
  const auto one = corpus_chrf({"the cat"}, {{"the cat"}});
  const auto two = corpus_chrf({"the cat"}, {{"a dog"}, {"the cat"}});
  CHECK(two.score == one.score);
  CHECK(two.signature == "nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0");
}

TEST_CASE("chrF names, signatures and errors", "[eval]") {
  const auto c = corpus_chrf({"a"}, {{"a"}});
  const auto cpp = corpus_chrf({"a"}, {{"a"}}, 2);
  CHECK(c.name == "chrF2");
  CHECK(cpp.name == "chrF2++");
  CHECK(cpp.signature == "nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:2.6.0");
  CHECK(nmt::eval::format_chrf(c) == "chrF2 = 100.00");
  CHECK(nmt::eval::format_chrf(cpp, 1, true) ==
        "chrF2++|nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:2.6.0 = 100.0");
  CHECK_THROWS_AS(corpus_chrf({"a", "b"}, {{"a"}}), nmt::DataError);
  nmt::eval::ChrfStats sum;
  sum += nmt::eval::chrf_stats({"a b"}, {{"a c"}});
  sum += nmt::eval::chrf_stats({"x"}, {{"x"}});
  CHECK(nmt::eval::compute_chrf(sum).score == corpus_chrf({"a b", "x"}, {{"a c", "x"}}).score);
}

TEST_CASE("score formatting rounds like Python and prints sacreBLEU's JSON", "[eval]") {
  using nmt::eval::format_fixed;
  CHECK(format_fixed(0.125, 2) == "0.12");    // exact tie: half to even, as Python
  CHECK(format_fixed(27.345, 2) == "27.34");  // 27.345 is stored just below
  CHECK(format_fixed(100.0, 1) == "100.0");
  const nmt::eval::MetricScore s{"chrF2", 100.0, "", "nrefs:1|nc:6|version:2.6.0"};
  CHECK(nmt::eval::format_json(s, 2) ==
        "{\n \"name\": \"chrF2\",\n \"score\": 100.0,\n \"signature\": "
        "\"nrefs:1|nc:6|version:2.6.0\",\n \"nrefs\": \"1\",\n \"nc\": \"6\",\n \"version\": "
        "\"2.6.0\"\n}");
  CHECK(nmt::eval::align_text_lines({"BLEU|x = 1.0 v", "chrF2|xyz = 2.0"}) ==
        "   BLEU|x = 1.0 v\nchrF2|xyz = 2.0\n");
}
