#include "catch_torch.h"  // first: see the header
#include "skip.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/core/InferenceMode.h>

#include "amp/autocast.h"
#include "decode/decode_fixture.h"
#include "decode/search.h"
#include "decode/search_steps.h"
#include "model/transformer.h"
#include "util/error.h"

using nmt::decode::beam_search;
using nmt::decode::greedy_search;
using nmt::decode::Hypothesis;
using nmt::decode::rows_kept_in_place;
using nmt::decode::search;
using nmt::decode::SearchIds;
using nmt::decode::SearchOptions;
using nmt::model::Transformer;
using nmt::test::batch_of;
using nmt::test::kBos;
using nmt::test::kEos;
using nmt::test::kPad;
using nmt::test::kVocab;
using nmt::test::random_sentences;
using nmt::test::tiny_model;

namespace {

const SearchIds kIds{kBos, kBos, kEos, kPad};

void require_same(const std::vector<std::vector<Hypothesis>>& a,
                  const std::vector<std::vector<Hypothesis>>& b, double tolerance = 1e-4) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("sentence " << i);
    REQUIRE(a[i].size() == b[i].size());
    for (size_t k = 0; k < a[i].size(); ++k) {
      INFO("hypothesis " << k);
      CHECK(a[i][k].tokens == b[i][k].tokens);
      CHECK(a[i][k].score == Approx(b[i][k].score).margin(tolerance));
      CHECK(a[i][k].normalized_score == Approx(b[i][k].normalized_score).margin(tolerance));
    }
  }
}

/// Sum of teacher-forced log-probabilities of tokens + EOS given the source.
double forced_score(Transformer& model, const std::vector<int64_t>& source,
                    const std::vector<int32_t>& tokens) {
  c10::InferenceMode guard;
  std::vector<int64_t> input{kBos};
  input.insert(input.end(), tokens.begin(), tokens.end());
  std::vector<int64_t> target(tokens.begin(), tokens.end());
  target.push_back(kEos);
  const at::Tensor src = batch_of({source});
  const at::Tensor logits = model->forward(src, batch_of({input}));
  const at::Tensor lprobs = logits[0].log_softmax(-1);
  double sum = 0;
  for (size_t t = 0; t < target.size(); ++t) sum += lprobs[t][target[t]].item<double>();
  return sum;
}

}  // namespace

TEST_CASE("length penalty and output length limit", "[decode][search]") {
  CHECK(nmt::decode::length_penalty(1, 1.0) == Approx(1.0));
  CHECK(nmt::decode::length_penalty(7, 1.0) == Approx(2.0));
  CHECK(nmt::decode::length_penalty(7, 0.5) == Approx(std::sqrt(2.0)));
  CHECK(nmt::decode::length_penalty(30, 0.0) == 1.0);
  SearchOptions o;
  o.max_len_a = 1.2;
  o.max_len_b = 10;
  CHECK(nmt::decode::max_output_length(10, o, 1024) == 22);
  CHECK(nmt::decode::max_output_length(10, o, 16) == 15);
}

TEST_CASE("rows kept by a step stay in place, and the last ones fill the places of ended ones",
          "[decode][search]") {
  using Rows = std::vector<int64_t>;
  CHECK(rows_kept_in_place({true, true, true}) == Rows{0, 1, 2});
  CHECK(rows_kept_in_place({true, false, true, true, false, true}) == Rows{0, 5, 2, 3});
  CHECK(rows_kept_in_place({false, true, false, true, true, true}) == Rows{4, 1, 5, 3});
  CHECK(rows_kept_in_place({false, false, true, true}) == Rows{2, 3});
  CHECK(rows_kept_in_place({true, true, false, false}) == Rows{0, 1});
  CHECK(rows_kept_in_place({false, false}).empty());
  CHECK(rows_kept_in_place({}).empty());
}

TEST_CASE("a sentence's next beams keep their parents' rows, the others fill the free ones",
          "[decode][search]") {
  using nmt::decode::extensions_in_parent_rows;
  using Places = std::vector<size_t>;
  // Extensions best first, by the row they extend: row r holds extension places[r].
  CHECK(extensions_in_parent_rows({0, 1, 2, 3}) == Places{0, 1, 2, 3});
  CHECK(extensions_in_parent_rows({3, 2, 1, 0}) == Places{3, 2, 1, 0});
  // Row 1 keeps its best extension (0), row 0 its only one (2), row 3 its (3); the second
  // extension of row 1 (1) takes row 2, which no extension extends.
  CHECK(extensions_in_parent_rows({1, 1, 0, 3}) == Places{2, 0, 1, 3});
  // The first step: every extension extends row 0 (the only live beam), best first.
  CHECK(extensions_in_parent_rows({0, 0, 0, 0}) == Places{0, 1, 2, 3});
  CHECK(extensions_in_parent_rows({2, 2, 2}) == Places{1, 2, 0});
  CHECK(extensions_in_parent_rows({0}) == Places{0});
  CHECK_THROWS_WITH(extensions_in_parent_rows({0, 2}), Catch::Contains("parent 2 outside 0 to 1"));
}

TEST_CASE("invalid search options are rejected naming the option", "[decode][search]") {
  SearchOptions o;
  o.beam = 2;
  o.nbest = 3;
  CHECK_THROWS_AS(nmt::decode::validate(o), nmt::ConfigError);
  CHECK_THROWS_WITH(nmt::decode::validate(o), Catch::Contains("nbest"));
  o = SearchOptions{};
  o.beam = 0;
  CHECK_THROWS_WITH(nmt::decode::validate(o), Catch::Contains("beam"));
  o = SearchOptions{};
  o.length_penalty = std::nan("");
  CHECK_THROWS_WITH(nmt::decode::validate(o), Catch::Contains("length_penalty"));
}

TEST_CASE("greedy scores are the model's log-probabilities of its output", "[decode][search]") {
  Transformer model = tiny_model(1);
  const auto sentences = random_sentences(6, 11);
  SearchOptions o;
  o.beam = 1;
  const auto result = greedy_search(*model, batch_of(sentences), kIds, o);
  int64_t ended_early = 0;
  for (size_t i = 0; i < sentences.size(); ++i) {
    const Hypothesis& h = result[i].at(0);
    INFO("sentence " << i);
    CHECK(h.score == Approx(forced_score(model, sentences[i], h.tokens)).margin(1e-4));
    CHECK(h.normalized_score == Approx(h.score / ((5.0 + h.tokens.size() + 1) / 6.0)));
    const int64_t limit = nmt::decode::max_output_length(sentences[i].size(), o, 64);
    CHECK(int64_t(h.tokens.size()) <= limit);
    ended_early += int64_t(h.tokens.size()) < limit;
    for (int32_t t : h.tokens) CHECK((t != kPad && t != kBos && t != kEos));
  }
  // The test means something only if rows finish at different steps.
  CHECK(ended_early > 0);
}

TEST_CASE("greedy search without scores picks the same tokens from the logits",
          "[decode][search]") {
  // Without a log-softmax: the same outputs, also where the length limit forces EOS and a
  // forced prefix starts them, and NaN scores (nothing reads them).
  Transformer model = tiny_model(1);
  const at::Tensor src = batch_of(random_sentences(8, 11));
  SearchIds prefixed = kIds;
  prefixed.forced_prefix = {5};
  for (const SearchIds& ids : {kIds, prefixed}) {
    for (const int64_t max_len_b : {3, 10}) {
      SearchOptions o;
      o.beam = 1;
      o.max_len_b = max_len_b;
      const auto scored = greedy_search(*model, src, ids, o);
      o.scores = false;
      const auto unscored = greedy_search(*model, src, ids, o);
      REQUIRE(unscored.size() == scored.size());
      for (size_t i = 0; i < scored.size(); ++i) {
        INFO("sentence " << i << ", max_len_b " << max_len_b << ", prefix "
                         << ids.forced_prefix.size());
        CHECK(unscored[i].at(0).tokens == scored[i].at(0).tokens);
        CHECK(std::isnan(unscored[i][0].score));
        CHECK(std::isnan(unscored[i][0].normalized_score));
        CHECK(std::isfinite(scored[i][0].score));
      }
    }
  }
}

TEST_CASE("beam size 1 equals greedy search", "[decode][search]") {
  for (bool cached : {true, false}) {
    Transformer model = tiny_model(2);
    const at::Tensor src = batch_of(random_sentences(8, 12));
    SearchOptions o;
    o.beam = 1;
    o.cached = cached;
    o.length_penalty = 0.6;
    INFO("cached " << cached);
    require_same(greedy_search(*model, src, kIds, o), beam_search(*model, src, kIds, o));
  }
}

TEST_CASE("cached incremental decoding gives the same output as re-running the prefix",
          "[decode][search]") {
  for (bool pre_norm : {false, true}) {
    Transformer model = tiny_model(3, {2, pre_norm});
    const at::Tensor src = batch_of(random_sentences(7, 13));
    for (int64_t beam : {1, 4}) {
      SearchOptions cached;
      cached.beam = beam;
      cached.nbest = beam;
      SearchOptions uncached = cached;
      uncached.cached = false;
      INFO("pre_norm " << pre_norm << ", beam " << beam);
      require_same(search(*model, src, kIds, cached), search(*model, src, kIds, uncached));
    }
  }
}

TEST_CASE("cached and uncached search agree for every positions and decoder_start",
          "[decode][search]") {
  using nmt::model::PositionEncoding;
  const std::vector<std::pair<const char*, PositionEncoding>> encodings{
      {"sinusoidal", PositionEncoding::kSinusoidal},
      {"learned", PositionEncoding::kLearned},
      {"marian", PositionEncoding::kMarian},
      {"m2m100", PositionEncoding::kM2m100}};
  const at::Tensor src = batch_of(random_sentences(6, 15));
  for (const auto& [name, positions] : encodings) {
    nmt::test::TinyModelOptions shape;
    shape.positions = positions;
    Transformer model = tiny_model(5, shape);
    // model.decoder_start bos, eos and pad: the start id search feeds first.
    for (int64_t start : {kBos, kEos, kPad}) {
      const SearchIds ids{start, kBos, kEos, kPad};
      for (int64_t beam : {1, 4}) {
        SearchOptions cached;
        cached.beam = beam;
        cached.nbest = beam;
        SearchOptions uncached = cached;
        uncached.cached = false;
        INFO("model.positions " << name << ", start id " << start << ", beam " << beam);
        require_same(search(*model, src, ids, cached), search(*model, src, ids, uncached));
      }
    }
  }
}

TEST_CASE("batch composition does not change any output", "[decode][search]") {
  Transformer model = tiny_model(4);
  const auto sentences = random_sentences(9, 14);
  for (int64_t beam : {1, 5}) {
    SearchOptions o;
    o.beam = beam;
    o.nbest = beam == 1 ? 1 : 3;
    const auto together = search(*model, batch_of(sentences), kIds, o);
    // Also in another order, mixed with other lengths.
    std::vector<std::vector<int64_t>> reversed(sentences.rbegin(), sentences.rend());
    const auto backwards = search(*model, batch_of(reversed), kIds, o);
    for (size_t i = 0; i < sentences.size(); ++i) {
      INFO("beam " << beam << ", sentence " << i);
      const auto alone = search(*model, batch_of({sentences[i]}), kIds, o);
      require_same({together[i]}, alone);
      require_same({backwards[sentences.size() - 1 - i]}, alone);
    }
  }
}

TEST_CASE("n-best lists are distinct and ordered by normalized score", "[decode][search]") {
  Transformer model = tiny_model(5);
  const auto sentences = random_sentences(6, 15);
  SearchOptions o;
  o.beam = 5;
  o.nbest = 5;
  const auto nbest = search(*model, batch_of(sentences), kIds, o);
  SearchOptions one = o;
  one.nbest = 1;
  const auto best = search(*model, batch_of(sentences), kIds, one);
  for (size_t i = 0; i < sentences.size(); ++i) {
    INFO("sentence " << i);
    REQUIRE(nbest[i].size() == 5);
    for (size_t k = 1; k < nbest[i].size(); ++k) {
      CHECK(nbest[i][k - 1].normalized_score >= nbest[i][k].normalized_score);
      for (size_t j = 0; j < k; ++j) CHECK(nbest[i][j].tokens != nbest[i][k].tokens);
    }
    for (const Hypothesis& h : nbest[i])
      CHECK(h.score == Approx(forced_score(model, sentences[i], h.tokens)).margin(1e-4));
    CHECK(best[i].at(0).tokens == nbest[i][0].tokens);
  }
}

TEST_CASE("the length limit forces EOS", "[decode][search]") {
  Transformer model = tiny_model(6);
  const auto sentences = random_sentences(5, 16);
  for (int64_t beam : {1, 3}) {
    SearchOptions o;
    o.beam = beam;
    o.max_len_a = 0;
    o.max_len_b = 2;
    for (const auto& hyps : search(*model, batch_of(sentences), kIds, o)) {
      REQUIRE(hyps.size() == 1);
      CHECK(hyps[0].tokens.size() <= 2);
    }
  }
}

TEST_CASE("a forced prefix starts every output and scores 0, greedy and beam", "[decode][search]") {
  // As transformers' forced_bos_token_id (an M2M100 or NLLB model's target-language code):
  // the tokens come first whatever the model prefers, and only what follows is scored.
  Transformer model = tiny_model(6);
  const auto sentences = random_sentences(6, 17);
  SearchIds ids = kIds;
  ids.forced_prefix = {5, 7};
  for (int64_t beam : {1, 3}) {
    INFO("beam " << beam);
    SearchOptions o;
    o.beam = beam;
    o.nbest = beam;
    const auto found = search(*model, batch_of(sentences), ids, o);
    for (size_t i = 0; i < found.size(); ++i) {
      REQUIRE(found[i].size() == static_cast<size_t>(beam));
      for (const Hypothesis& h : found[i]) {
        REQUIRE(h.tokens.size() >= 2);
        CHECK((h.tokens[0] == 5 && h.tokens[1] == 7));
        // The teacher-forced score less the prefix's own log-probabilities.
        c10::InferenceMode guard;
        std::vector<int64_t> input{kBos};
        input.insert(input.end(), h.tokens.begin(), h.tokens.end());
        const at::Tensor lprobs =
            model->forward(batch_of({sentences[i]}), batch_of({input}))[0].log_softmax(-1);
        const double prefix = lprobs[0][5].item<double>() + lprobs[1][7].item<double>();
        CHECK(h.score == Approx(forced_score(model, sentences[i], h.tokens) - prefix).margin(1e-4));
      }
    }
  }
  // Without the prefix greedy search prefers other first tokens: the forcing is what shows.
  const auto free = search(*model, batch_of(sentences), kIds, SearchOptions{});
  bool differs = false;
  for (const auto& hyps : free)
    differs =
        differs || hyps.at(0).tokens.size() < 2 || hyps[0].tokens[0] != 5 || hyps[0].tokens[1] != 7;
  CHECK(differs);
  // A forced EOS, pad or BOS is a caller's error.
  ids.forced_prefix = {kEos};
  CHECK_THROWS(search(*model, batch_of(sentences), ids, SearchOptions{}));
}

TEST_CASE("search runs under CPU autocast (bf16)", "[decode][search][amp]") {
  Transformer model = tiny_model(7);
  const auto sentences = random_sentences(4, 17);
  for (int64_t beam : {1, 3}) {
    SearchOptions o;
    o.beam = beam;
    o.nbest = beam;
    nmt::amp::AutocastScope autocast(nmt::amp::AmpMode::kBf16, c10::DeviceType::CPU);
    const auto result = search(*model, batch_of(sentences), kIds, o);
    REQUIRE(result.size() == sentences.size());
    for (const auto& hyps : result) {
      REQUIRE(int64_t(hyps.size()) == beam);
      for (const Hypothesis& h : hyps) CHECK(std::isfinite(h.score));
    }
  }
}

TEST_CASE("on a GPU, cached and uncached search agree, also under fp16 autocast",
          "[decode][search][cuda]") {
  if (!at::hasCUDA()) {
    NMT_SKIP_WITHOUT_CUDA("no CUDA device visible");
  }
  Transformer model = tiny_model(8);
  model->to(at::kCUDA);
  const auto sentences = random_sentences(6, 18);
  const at::Tensor src = batch_of(sentences).to(at::kCUDA);
  SearchOptions o;
  o.beam = 4;
  o.nbest = 2;
  SearchOptions uncached = o;
  uncached.cached = false;
  require_same(search(*model, src, kIds, o), search(*model, src, kIds, uncached), 1e-3);
  SearchOptions greedy = o;
  greedy.beam = greedy.nbest = 1;
  Transformer cpu_model = tiny_model(8);
  require_same(search(*model, src, kIds, greedy),
               search(*cpu_model, batch_of(sentences), kIds, greedy), 1e-3);
  nmt::amp::AutocastScope autocast(nmt::amp::AmpMode::kFp16, c10::DeviceType::CUDA);
  for (const auto& hyps : search(*model, src, kIds, o)) {
    REQUIRE(hyps.size() == 2);
    for (const Hypothesis& h : hyps) CHECK(std::isfinite(h.score));
  }
}
