// Random sampling (decode/sampling.h): the draws follow the distribution they are given,
// top-k cuts its support, a seed reproduces them, and a sentence's draws do not depend on
// its batch.
#include "catch_torch.h"  // first: see the header

#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include <ATen/ATen.h>

#include "decode/decode_fixture.h"
#include "decode/sampling.h"
#include "decode/search.h"
#include "model/transformer.h"
#include "util/error.h"

using nmt::decode::Hypothesis;
using nmt::decode::sample_tokens;
using nmt::decode::sample_uniform;
using nmt::decode::SamplingOptions;
using nmt::decode::search;
using nmt::decode::SearchIds;
using nmt::decode::SearchOptions;
using nmt::test::kBos;
using nmt::test::kEos;
using nmt::test::kPad;
using nmt::test::kVocab;
using nmt::test::tiny_model;

namespace {

constexpr int64_t kDraws = 20000;

/// kDraws rows of the same log-probabilities log(p), one sentence each, drawn at `step`.
std::vector<int64_t> draw(const std::vector<float>& p, const SamplingOptions& o,
                          int64_t step = 0) {
  const at::Tensor row = at::tensor(p).log();
  const at::Tensor lprobs = row.unsqueeze(0).expand({kDraws, int64_t(p.size())}).contiguous();
  std::vector<int64_t> sentences(kDraws);
  for (int64_t i = 0; i < kDraws; ++i) sentences[i] = i;
  const at::Tensor tokens = sample_tokens(lprobs, o, sentences, step);
  return {tokens.data_ptr<int64_t>(), tokens.data_ptr<int64_t>() + kDraws};
}

std::vector<double> frequencies(const std::vector<int64_t>& tokens, size_t vocab) {
  std::vector<double> f(vocab, 0.0);
  for (int64_t t : tokens) f.at(static_cast<size_t>(t)) += 1.0 / double(tokens.size());
  return f;
}

/// The models sampled from: one layer each, the EOS row untouched.
const nmt::test::TinyModelOptions kSampledModel{1, false, 1.0};

/// `count` random sentences (ids 4..V-1 then EOS), right-padded into one batch.
at::Tensor random_batch(int64_t count, uint64_t seed) {
  at::manual_seed(seed);
  at::Tensor out = at::full({count, 12}, kPad, at::kLong);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t length = at::randint(1, 11, {1}).item<int64_t>();
    out[i].narrow(0, 0, length).copy_(at::randint(4, kVocab, {length}, at::kLong));
    out[i][length] = kEos;
  }
  return out;
}

std::vector<std::vector<int32_t>> tokens_of(const std::vector<std::vector<Hypothesis>>& hyps) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& h : hyps) out.push_back(h.at(0).tokens);
  return out;
}

SearchOptions sampling_options(SamplingOptions s) {
  SearchOptions o;
  o.beam = 1;
  o.sampling = s;
  return o;
}

}  // namespace

TEST_CASE("sample_uniform lies between 0 and 1, spread out, a function of its arguments",
          "[decode][sampling]") {
  double sum = 0;
  for (int64_t i = 0; i < 10000; ++i) {
    const float u = sample_uniform(7, i, 3);
    REQUIRE(u >= 0.0f);
    REQUIRE(u < 1.0f);
    sum += u;
  }
  CHECK(sum / 10000 == Approx(0.5).margin(0.01));
  CHECK(sample_uniform(7, 5, 3) == sample_uniform(7, 5, 3));
  // Pinned: a seeded translation must draw the same tokens in every build (util/hash.h).
  CHECK(sample_uniform(7, 5, 3) == 15486958.0f / 16777216.0f);
  CHECK(sample_uniform(7, 5, 3) != sample_uniform(8, 5, 3));
  CHECK(sample_uniform(7, 5, 3) != sample_uniform(7, 6, 3));
  CHECK(sample_uniform(7, 5, 3) != sample_uniform(7, 5, 4));
}

TEST_CASE("draws follow the distribution, and banned tokens are never drawn",
          "[decode][sampling]") {
  const std::vector<float> p{0.0f, 0.5f, 0.3f, 0.15f, 0.05f};  // token 0 banned (-inf)
  SamplingOptions o;
  o.seed = 3;
  const std::vector<double> f = frequencies(draw(p, o), p.size());
  CHECK(f[0] == 0.0);
  for (size_t t = 1; t < p.size(); ++t) {
    INFO("token " << t);
    CHECK(f[t] == Approx(p[t]).margin(0.015));
  }

  // Temperature T: p^(1/T), renormalized.
  o.temperature = 2.0;
  const std::vector<double> hot = frequencies(draw(p, o), p.size());
  double z = 0;
  for (float q : p) z += std::sqrt(double(q));
  CHECK(hot[0] == 0.0);
  for (size_t t = 1; t < p.size(); ++t) {
    INFO("token " << t << " at temperature 2");
    CHECK(hot[t] == Approx(std::sqrt(double(p[t])) / z).margin(0.015));
  }
  o.temperature = 0.05;  // nearly greedy
  CHECK(frequencies(draw(p, o), p.size())[1] > 0.99);
}

TEST_CASE("top-k draws only among the k most probable tokens, renormalized",
          "[decode][sampling]") {
  const std::vector<float> p{0.1f, 0.4f, 0.05f, 0.3f, 0.15f};
  SamplingOptions o;
  o.top_k = 2;  // tokens 1 and 3: 0.4 / 0.7 and 0.3 / 0.7
  const std::vector<double> f = frequencies(draw(p, o), p.size());
  CHECK(f[0] == 0.0);
  CHECK(f[2] == 0.0);
  CHECK(f[4] == 0.0);
  CHECK(f[1] == Approx(0.4 / 0.7).margin(0.015));
  CHECK(f[3] == Approx(0.3 / 0.7).margin(0.015));
  o.top_k = 1;
  CHECK(frequencies(draw(p, o), p.size())[1] == Approx(1.0).margin(1e-9));
  o.top_k = 100;  // more than the vocabulary: all of it
  CHECK(frequencies(draw(p, o), p.size())[2] > 0.03);
}

TEST_CASE("the same seed gives the same draws, another seed others", "[decode][sampling]") {
  const std::vector<float> p{0.2f, 0.2f, 0.2f, 0.2f, 0.2f};
  SamplingOptions o;
  o.seed = 11;
  const std::vector<int64_t> a = draw(p, o);
  CHECK(draw(p, o) == a);
  o.seed = 12;
  CHECK(draw(p, o) != a);
  o.seed = 11;
  CHECK(draw(p, o, /*step=*/1) != a);
}

TEST_CASE("sampled translations are reproducible and independent of the batch",
          "[decode][sampling]") {
  nmt::model::Transformer model = tiny_model(21, kSampledModel);
  const SearchIds ids{kBos, kBos, kEos, kPad};
  const at::Tensor src = random_batch(8, 22);
  SamplingOptions s;
  s.seed = 5;
  s.temperature = 1.5;  // flatter, so that the draws differ from greedy
  const SearchOptions o = sampling_options(s);
  std::vector<int64_t> sentences{100, 101, 102, 103, 104, 105, 106, 107};
  const auto all = tokens_of(search(*model, src, ids, o, sentences));
  CHECK(tokens_of(search(*model, src, ids, o, sentences)) == all);

  // Each sentence alone, in reverse order, under its own index: the same draws.
  for (int64_t i = 7; i >= 0; --i) {
    INFO("sentence " << i);
    const auto alone = search(*model, src.narrow(0, i, 1), ids, o, {sentences[i]});
    CHECK(alone.at(0).at(0).tokens == all[i]);
  }

  // Another seed changes some output; greedy differs from sampling at temperature 1.5.
  SamplingOptions other = s;
  other.seed = 6;
  CHECK(tokens_of(search(*model, src, ids, sampling_options(other), sentences)) != all);
  SearchOptions greedy;
  greedy.beam = 1;
  CHECK(tokens_of(search(*model, src, ids, greedy)) != all);

  // topk:1 is greedy search.
  SamplingOptions top1;
  top1.top_k = 1;
  CHECK(tokens_of(search(*model, src, ids, sampling_options(top1), sentences)) ==
        tokens_of(search(*model, src, ids, greedy)));
}

namespace {

/// Length of row `row` of a batch from random_batch: its tokens up to and including EOS.
int64_t unpadded_length(const at::Tensor& batch, int64_t row) {
  int64_t n = 0;
  while (n < batch.size(1) && batch[row][n].item<int64_t>() != kPad) ++n;
  return n;
}

/// The model's log-probabilities of the next token after BOS + prefix for source `src` [1, S],
/// as search() constrains them (pad and BOS banned).
at::Tensor next_lprobs(nmt::model::TransformerImpl& model, const at::Tensor& src,
                       const std::vector<int32_t>& prefix) {
  std::vector<int64_t> input{kBos};
  input.insert(input.end(), prefix.begin(), prefix.end());
  at::NoGradGuard no_grad;
  at::Tensor lprobs = model.forward(src, at::tensor(input).unsqueeze(0))[0]
                          [int64_t(prefix.size())]
                              .log_softmax(-1);
  lprobs[kPad] = -std::numeric_limits<float>::infinity();
  lprobs[kBos] = -std::numeric_limits<float>::infinity();
  return lprobs;
}

/// How far the draw u (sample_uniform) of a row with log-probabilities `lprobs` lies from the
/// nearest boundary of its cumulative distribution, in units of total probability: how far a
/// change of the probabilities must move a boundary to change the token drawn.
double distance_to_boundary(const at::Tensor& lprobs, double temperature, float u) {
  const at::Tensor p = ((lprobs - lprobs.max()) / temperature).softmax(0).to(at::kDouble);
  const at::Tensor cdf = p.cumsum(0);
  const double target = double(u) * cdf[-1].item<double>();
  return (cdf - target).abs().min().item<double>();
}

/// Log-probabilities [1, tokens] falling from -1 to -90: token 0 the most probable.
at::Tensor peaked_row(int64_t tokens) { return at::linspace(-1.0, -90.0, tokens).unsqueeze(0); }

}  // namespace

TEST_CASE("a sentence's draws change with its batch's padding only where a draw lies within "
          "float rounding of a boundary",
          "[decode][sampling]") {
  // nmt-translate batches lines by --max-tokens, so a line is padded to its batch's longest
  // source, and the model's probabilities change in the last bits; so, rarely, does a draw.
  // Each sentence is drawn in one padded batch of 8 (lengths 2..11, padded to 12) and alone
  // without padding; where the tokens differ, the first differing step must be a draw that
  // close to a boundary of the distribution.
  nmt::model::Transformer model = tiny_model(31, kSampledModel);
  const SearchIds ids{kBos, kBos, kEos, kPad};
  const at::Tensor batch = random_batch(8, 32);
  SamplingOptions s;
  s.seed = 9;
  s.temperature = 1.5;
  const SearchOptions o = sampling_options(s);
  const std::vector<int64_t> sentences{40, 41, 42, 43, 44, 45, 46, 47};
  const auto batched = tokens_of(search(*model, batch, ids, o, sentences));
  int differing = 0;
  for (int64_t i = 0; i < 8; ++i) {
    INFO("sentence " << i);
    const int64_t length = unpadded_length(batch, i);
    REQUIRE(length < batch.size(1));  // the sentence is padded in its batch
    const at::Tensor alone_src = batch.narrow(0, i, 1).narrow(1, 0, length);
    const auto alone = tokens_of(search(*model, alone_src, ids, o, {sentences[i]})).at(0);

    // Padding changes the probabilities by float rounding only: the mask works.
    for (size_t t = 0; t <= batched[i].size(); ++t) {
      const std::vector<int32_t> prefix(batched[i].begin(), batched[i].begin() + t);
      const at::Tensor padded = next_lprobs(*model, batch.narrow(0, i, 1), prefix);
      const at::Tensor unpadded = next_lprobs(*model, alone_src, prefix);
      const at::Tensor finite = padded.isfinite();
      CHECK(at::allclose(padded.masked_select(finite), unpadded.masked_select(finite), 1e-5,
                         1e-5));
    }
    if (alone == batched[i]) continue;
    ++differing;
    size_t t = 0;
    while (t < alone.size() && t < batched[i].size() && alone[t] == batched[i][t]) ++t;
    const std::vector<int32_t> prefix(alone.begin(), alone.begin() + t);
    const double distance =
        distance_to_boundary(next_lprobs(*model, alone_src, prefix), s.temperature,
                             sample_uniform(s.seed, sentences[i], int64_t(t)));
    INFO("first differing step " << t << ": the draw lies " << distance << " from a boundary");
    CHECK(distance < 1e-5);
  }
  // The claim rests on the checks above; the count is printed with -s.
  UNSCOPED_INFO(differing << " of 8 sentences differ between the batch and alone");
  SUCCEED();
}

TEST_CASE("a tiny temperature draws the most probable token, never NaN", "[decode][sampling]") {
  // Dividing float32 log-probabilities by T below about 1e-38 x |log p| made every one -inf:
  // softmax gave NaN and the draw took the last token. Shifted by the row's maximum first,
  // the best one stays at 0. (validate() refuses T < 0.001; this is the draw's own guard.)
  SamplingOptions o;
  for (double t : {1e-3, 1e-30, 1e-40}) {
    o.temperature = t;
    INFO("temperature " << t);
    for (int64_t sentence = 0; sentence < 50; ++sentence)
      CHECK(sample_tokens(peaked_row(30), o, {sentence}, 0).item<int64_t>() == 0);
  }
}

TEST_CASE("sampling scores are the model's log-probabilities of the drawn tokens",
          "[decode][sampling]") {
  nmt::model::Transformer model = tiny_model(23, kSampledModel);
  const SearchIds ids{kBos, kBos, kEos, kPad};
  const at::Tensor src = random_batch(3, 24);
  SamplingOptions s;
  s.temperature = 3.0;
  const auto hyps = search(*model, src, ids, sampling_options(s));
  for (int64_t i = 0; i < 3; ++i) {
    const Hypothesis& h = hyps.at(i).at(0);
    std::vector<int64_t> input{kBos}, target;
    for (int32_t t : h.tokens) {
      input.push_back(t);
      target.push_back(t);
    }
    target.push_back(kEos);
    at::NoGradGuard no_grad;
    const at::Tensor lprobs =
        model->forward(src.narrow(0, i, 1), at::tensor(input).unsqueeze(0))[0].log_softmax(-1);
    double sum = 0;
    for (size_t t = 0; t < target.size(); ++t) sum += lprobs[t][target[t]].item<double>();
    INFO("sentence " << i);
    CHECK(h.score == Approx(sum).margin(1e-3));
  }
}

TEST_CASE("sampling refuses beam or n-best and bad values, naming them", "[decode][sampling]") {
  SearchOptions o = sampling_options({});
  o.beam = 4;
  CHECK_THROWS_WITH(nmt::decode::validate(o), Catch::Contains("expected beam 1 and nbest 1"));
  o.beam = 1;
  o.sampling->top_k = -1;
  CHECK_THROWS_AS(nmt::decode::validate(o), nmt::ConfigError);
  o.sampling->top_k = 0;
  o.sampling->temperature = 0;
  CHECK_THROWS_WITH(nmt::decode::validate(o), Catch::Contains("temperature"));
  o.sampling->temperature = 1e-31;
  CHECK_THROWS_WITH(nmt::decode::validate(o),
                    Catch::Contains("sampling temperature: expected a number in [0.001, 1000]"));
  o.sampling->temperature = 2000;
  CHECK_THROWS_AS(nmt::decode::validate(o), nmt::ConfigError);
  o.sampling->temperature = 1;
  CHECK_NOTHROW(nmt::decode::validate(o));
}
