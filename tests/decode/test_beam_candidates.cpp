#include "catch_torch.h"  // first: see the header

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include <ATen/ATen.h>

#include "decode/beam_candidates.h"

using nmt::decode::best_candidates;
using nmt::decode::Candidates;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

/// The definition: every (score + lprob, beam * V + token) of a sentence, in float32, sorted by
/// value (best first), equal values by index; the first `width`.
void require_definition(const Candidates& c, const at::Tensor& scores, const at::Tensor& lprobs,
                        int64_t n, int64_t beam) {
  const int64_t vocab = lprobs.size(1);
  const int64_t width = std::min(2 * beam, beam * vocab);
  REQUIRE(c.width == width);
  REQUIRE(c.vocab == vocab);
  REQUIRE(c.values.sizes() == at::IntArrayRef({n, width}));
  REQUIRE(c.index.sizes() == at::IntArrayRef({n, width}));
  const at::Tensor s = scores.contiguous();
  const at::Tensor l = lprobs.contiguous();
  for (int64_t i = 0; i < n; ++i) {
    std::vector<float> value(beam * vocab);
    for (int64_t k = 0; k < beam; ++k)
      for (int64_t v = 0; v < vocab; ++v) {
        float x =
            s.data_ptr<float>()[i * beam + k] + l.data_ptr<float>()[(i * beam + k) * vocab + v];
        if (std::isnan(x)) x = -kInf;
        value[k * vocab + v] = x;
      }
    std::vector<int64_t> order(value.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return value[a] > value[b]; });
    for (int64_t j = 0; j < width; ++j) {
      INFO("sentence " << i << ", candidate " << j);
      CHECK(c.index[i][j].item<int64_t>() == order[j]);
      CHECK(c.values[i][j].item<float>() == value[order[j]]);
    }
  }
}

}  // namespace

TEST_CASE("beam candidates: the best of every sentence's rows, as the definition orders them",
          "[beam_candidates]") {
  at::manual_seed(7);
  // A vocabulary that is not a multiple of the scan's block, large enough for several blocks.
  for (const int64_t vocab : {1, 3, 50, 1000, 8003}) {
    for (const int64_t beam : {1, 2, 4, 5}) {
      INFO("vocab " << vocab << ", beam " << beam);
      const int64_t n = 3;
      const at::Tensor lprobs = at::randn({n * beam, vocab}).mul(3).log_softmax(1);
      const at::Tensor scores = at::randn({n * beam}).mul(5).sub(20);
      const Candidates c = best_candidates(scores, lprobs, n, beam);
      require_definition(c, scores, lprobs, n, beam);
      // The values are at::topk's of the sums (the path other devices take).
      const at::Tensor sums = (scores.unsqueeze(1) + lprobs).view({n, beam * vocab});
      CHECK(at::equal(c.values, std::get<0>(sums.topk(c.width, 1))));
    }
  }
}

TEST_CASE("beam candidates: ties, -inf rows and a forced token", "[beam_candidates]") {
  const int64_t n = 2, beam = 4, vocab = 300;
  SECTION("equal values: lower index first, across beams and blocks") {
    // Values on a coarse grid: many ties, also between beams with equal scores.
    const at::Tensor lprobs = at::randint(-6, 0, {n * beam, vocab}).to(at::kFloat).div(2);
    const at::Tensor scores = at::tensor({-1.0f, -1.0f, -1.5f, -1.0f, 0.0f, -0.5f, -0.5f, -0.5f});
    require_definition(best_candidates(scores, lprobs, n, beam), scores, lprobs, n, beam);
  }
  SECTION("the first step: beams 1.. are -inf, pad and BOS banned") {
    at::Tensor lprobs = at::randn({n * beam, vocab}).log_softmax(1);
    lprobs.select(1, 0).fill_(-kInf);
    lprobs.select(1, 2).fill_(-kInf);
    const at::Tensor scores = at::tensor({0.0f, -kInf, -kInf, -kInf, 0.0f, -kInf, -kInf, -kInf});
    const Candidates c = best_candidates(scores, lprobs, n, beam);
    require_definition(c, scores, lprobs, n, beam);
    CHECK(c.index.lt(vocab).all().item<bool>());  // all from beam 0
  }
  SECTION("a forced token: one finite candidate, then -inf ones by index") {
    at::Tensor lprobs = at::full({n * beam, vocab}, -kInf);
    lprobs.select(1, 17).fill_(0.0f);
    const at::Tensor scores = at::tensor({0.0f, -kInf, -kInf, -kInf, -3.0f, -kInf, -kInf, -kInf});
    const Candidates c = best_candidates(scores, lprobs, n, beam);
    require_definition(c, scores, lprobs, n, beam);
    CHECK(c.values[1][0].item<float>() == -3.0f);
    CHECK(c.index[1][0].item<int64_t>() == 17);
    CHECK(c.index[1][1].item<int64_t>() == 0);
  }
  SECTION("large scores: sums that differ from the list's worst in the last place") {
    // Scores near -200 where a float's last place is 1.5e-5: the prefilter's margin must not
    // drop a sum that the exact comparison keeps.
    at::Tensor lprobs = at::full({n * beam, vocab}, -30.0f);
    const at::Tensor scores = at::full({n * beam}, -200.0f);
    for (int64_t r = 0; r < n * beam; ++r)
      for (int64_t v = r; v < vocab; v += 37) lprobs[r][v] = -1.0f - 1e-5f * float((v * 7 + r) % 5);
    require_definition(best_candidates(scores, lprobs, n, beam), scores, lprobs, n, beam);
  }
  SECTION("NaN counts as -inf") {
    at::Tensor lprobs = at::randn({n * beam, vocab}).log_softmax(1);
    lprobs[0].fill_(std::numeric_limits<float>::quiet_NaN());
    lprobs[1][5] = std::numeric_limits<float>::quiet_NaN();
    const at::Tensor scores = at::zeros({n * beam});
    require_definition(best_candidates(scores, lprobs, n, beam), scores, lprobs, n, beam);
  }
}

TEST_CASE("beam candidates: a shape or type it cannot take is refused, naming it",
          "[beam_candidates]") {
  const at::Tensor lprobs = at::zeros({8, 10});
  CHECK_THROWS_WITH(best_candidates(at::zeros({6}), lprobs, 2, 4),
                    Catch::Matchers::Contains("expected scores [8]"));
  CHECK_THROWS_WITH(best_candidates(at::zeros({8}), lprobs.to(at::kDouble), 2, 4),
                    Catch::Matchers::Contains("expected float32"));
}

TEST_CASE("best tokens: each row's best token and log-probability, as max(1), ties to the lower",
          "[beam_candidates]") {
  at::manual_seed(11);
  for (const int64_t vocab : {1, 2, 127, 129, 8003}) {
    INFO("vocabulary " << vocab);
    // A coarse grid gives ties within rows, also across the scan's blocks of 128.
    at::Tensor lprobs = at::randint(-8, 0, {9, vocab}).to(at::kFloat).div(4);
    lprobs[1].fill_(-kInf);  // a row with nothing allowed
    lprobs[2].fill_(-kInf);  // a forced token
    lprobs[2][vocab - 1] = 0.0f;
    const auto [values, tokens] = nmt::decode::best_tokens(lprobs);
    const auto [max_values, max_tokens] = lprobs.max(1);
    REQUIRE(tokens.sizes() == at::IntArrayRef({9}));
    REQUIRE(tokens.scalar_type() == at::kLong);
    REQUIRE(values.scalar_type() == at::kFloat);
    CHECK(at::equal(values, max_values));
    for (int64_t r = 0; r < 9; ++r) {
      INFO("row " << r);
      // The first position of the row's maximum (-inf rows: token 0).
      const at::Tensor at_max = lprobs[r].eq(max_values[r]).nonzero();
      CHECK(tokens[r].item<int64_t>() == at_max[0][0].item<int64_t>());
    }
  }
  SECTION("a strided view, as a step's logits may be") {
    const at::Tensor wide = at::randn({4, 2, 300});
    const at::Tensor lprobs = wide.select(1, 1);
    const auto [values, tokens] = nmt::decode::best_tokens(lprobs);
    CHECK(at::equal(tokens, std::get<1>(lprobs.max(1))));
    CHECK(at::equal(values, std::get<0>(lprobs.max(1))));
  }
}
