// BLEU on tiny corpora whose statistics can be counted by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "eval/bleu.h"
#include "util/error.h"

using nmt::eval::corpus_bleu;
using Lines = std::vector<std::string>;

TEST_CASE("BLEU of a perfect match is 100 and of a total mismatch 0", "[eval]") {
  const Lines text = {"The quick brown fox jumps over the lazy dog.", "Hello, world!"};
  const auto perfect = corpus_bleu(text, {text});
  CHECK(perfect.score == Approx(100.0).epsilon(1e-12));
  CHECK(perfect.bp == 1.0);
  CHECK(perfect.sys_len == 14);  // 10 + 4 tokens after 13a
  CHECK(perfect.counts == perfect.totals);

  const auto none = corpus_bleu({"aaa bbb ccc ddd"}, {{"xxx yyy zzz www"}});
  CHECK(none.score == 0.0);
  CHECK(none.precisions == std::array<double, 4>{0, 0, 0, 0});
  CHECK(none.totals == std::array<int64_t, 4>{4, 3, 2, 1});
  CHECK(none.counts == std::array<int64_t, 4>{0, 0, 0, 0});
}

TEST_CASE("BLEU counts clipped n-grams, smooths missing orders and applies the BP", "[eval]") {
  // hyp: the the cat (3 tokens); ref: the cat sat on the mat (6 tokens).
  const auto r = corpus_bleu({"the the cat"}, {{"the cat sat on the mat"}});
  CHECK(r.counts == std::array<int64_t, 4>{3, 1, 0, 0});  // "the" x2 (ref has 2), "cat"; "the cat"
  CHECK(r.totals == std::array<int64_t, 4>{3, 2, 1, 0});
  // 'exp' smoothing: the first order without matches gets 100 / (2 * total); an order without
  // any n-gram stops the loop and keeps precision 0 (log floored), so the score is 0.
  CHECK(r.precisions[0] == 100.0);
  CHECK(r.precisions[1] == 50.0);
  CHECK(r.precisions[2] == 50.0);
  CHECK(r.precisions[3] == 0.0);
  CHECK(r.score == 0.0);
  CHECK(r.bp == Approx(std::exp(1.0 - 6.0 / 3.0)));
  CHECK(r.ratio == 0.5);

  // Four tokens: all orders present; 2nd-4th smoothed as 1/2, 1/4, 1/8 of 100/total.
  const auto s = corpus_bleu({"a b c d"}, {{"a x y z q"}});
  CHECK(s.counts == std::array<int64_t, 4>{1, 0, 0, 0});
  CHECK(s.precisions[1] == Approx(100.0 / (2 * 3)));
  CHECK(s.precisions[2] == Approx(100.0 / (4 * 2)));
  CHECK(s.precisions[3] == Approx(100.0 / (8 * 1)));
  const double expected =
      std::exp(1.0 - 5.0 / 4.0) *
      std::exp((std::log(25.0) + std::log(100.0 / 6) + std::log(12.5) + std::log(12.5)) / 4);
  CHECK(s.score == Approx(expected).epsilon(1e-12));
}

TEST_CASE("BLEU with two references clips by the larger count and the closest length", "[eval]") {
  // Closest reference length: |3-2| == |3-4|, the shorter (2) wins.
  const auto r = corpus_bleu({"a a a"}, {{"a b"}, {"a a c d"}});
  CHECK(r.ref_len == 2);
  CHECK(r.counts[0] == 2);  // max("a" in ref1 = 1, ref2 = 2)
  CHECK(r.counts[1] == 1);  // "a a" only in ref2
  CHECK(r.signature == "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
}

TEST_CASE("BLEU statistics of shards add up to those of the whole corpus", "[eval]") {
  const Lines hyps = {"the cat sat", "a dog barked loudly .", "", "yes, 1,000.5 people"};
  const Lines refs = {"the cat sat down", "the dog barked .", "nothing", "yes, 1,000 people"};
  nmt::eval::BleuStats sum = nmt::eval::bleu_stats({hyps[0], hyps[1]}, {{refs[0], refs[1]}});
  sum += nmt::eval::bleu_stats({hyps[2], hyps[3]}, {{refs[2], refs[3]}});
  const auto whole = corpus_bleu(hyps, {refs});
  const auto shards = nmt::eval::compute_bleu(sum);
  CHECK(shards.counts == whole.counts);
  CHECK(shards.totals == whole.totals);
  CHECK(shards.sys_len == whole.sys_len);
  CHECK(shards.ref_len == whole.ref_len);
  CHECK(shards.score == whole.score);
}

TEST_CASE("BLEU rejects reference streams of the wrong length", "[eval]") {
  CHECK_THROWS_AS(corpus_bleu({"a", "b"}, {{"a"}}), nmt::DataError);
  CHECK_THROWS_WITH(corpus_bleu({"a", "b"}, {{"a", "b"}, {"a"}}),
                    Catch::Contains("reference stream 2 has 1 lines, expected 2"));
  CHECK_THROWS_AS(corpus_bleu({"a"}, {}), nmt::DataError);
  CHECK(corpus_bleu({}, {{}}).score == 0.0);
}

TEST_CASE("format_bleu prints like sacreBLEU", "[eval]") {
  const auto r = corpus_bleu({"The cat sat on the mat.", "Hello &amp; world"},
                             {{"The cat sat on a mat.", "Hello & world!"}});
  CHECK(nmt::eval::format_bleu(r) ==
        "BLEU = 48.77 90.0/75.0/50.0/25.0 (BP = 0.905 ratio = 0.909 hyp_len = 10 ref_len = 11)");
  CHECK(nmt::eval::format_bleu(r, 1, true) ==
        "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = 48.8 "
        "90.0/75.0/50.0/25.0 (BP = 0.905 ratio = 0.909 hyp_len = 10 ref_len = 11)");
}
