// decode/forced_scores.h: the teacher-forced scores of given pairs, batched by tokens, equal
// each pair's log-probability summed token by token from its own unpadded forward pass.
#include "catch_torch.h"  // first: see the header

#include <algorithm>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "decode/decode_fixture.h"
#include "decode/forced_scores.h"
#include "model/transformer.h"

using nmt::decode::forced_scores;
using nmt::decode::ForcedIds;
using nmt::decode::ForcedScoreOptions;
using nmt::decode::PairScore;
using nmt::model::Transformer;
using nmt::test::kBos;
using nmt::test::kEos;
using nmt::test::kPad;
using nmt::test::kVocab;
using nmt::test::tiny_model;

namespace {

using Sentences = std::vector<std::vector<int64_t>>;

/// Random id sequences (ids 4..V-1) of 0..11 tokens, with EOS appended when `eos`.
Sentences random_ids(int64_t count, uint64_t seed, bool eos, int64_t shortest) {
  at::manual_seed(seed);
  Sentences out;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t length = at::randint(shortest, 12, {1}).item<int64_t>();
    const at::Tensor ids = at::randint(4, kVocab, {std::max<int64_t>(length, 1)}, at::kLong);
    std::vector<int64_t> s(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + length);
    if (eos) s.push_back(kEos);
    out.push_back(s);
  }
  return out;
}

/// log p(target + EOS | source) of one pair, alone in its batch, summed token by token.
double one_pair(Transformer& model, const std::vector<int64_t>& source,
                const std::vector<int64_t>& target) {
  c10::InferenceMode guard;
  std::vector<int64_t> input{kBos};
  input.insert(input.end(), target.begin(), target.end());
  const at::Tensor src = at::tensor(source, at::kLong).unsqueeze(0);
  const at::Tensor logits = model->forward(src, at::tensor(input, at::kLong).unsqueeze(0));
  const at::Tensor lprobs = logits[0].to(at::kDouble).log_softmax(-1);
  double sum = 0;
  for (size_t t = 0; t < target.size(); ++t) sum += lprobs[t][target[t]].item<double>();
  return sum + lprobs[int64_t(target.size())][kEos].item<double>();
}

}  // namespace

TEST_CASE("scorer: batched teacher-forced scores equal each pair scored alone",
          "[decode][scorer]") {
  Transformer model = tiny_model(5);
  const Sentences sources = random_ids(9, 21, true, 1);
  const Sentences targets = random_ids(9, 22, false, 0);  // some empty: EOS alone
  const ForcedIds ids{kBos, kEos, kPad};
  for (const int64_t max_tokens : {int64_t{1}, int64_t{30}, int64_t{4096}}) {
    INFO("max_tokens " << max_tokens);
    ForcedScoreOptions options;
    options.max_tokens = max_tokens;
    int64_t batches = 0, last_done = 0;
    const std::vector<PairScore> scores =
        forced_scores(*model, ids, sources, targets, options, [&](int64_t done) {
          ++batches;
          CHECK(done > last_done);
          last_done = done;
        });
    REQUIRE(scores.size() == sources.size());
    CHECK(last_done == int64_t(sources.size()));
    if (max_tokens == 1) CHECK(batches == int64_t(sources.size()));
    if (max_tokens == 4096) CHECK(batches == 1);
    for (size_t i = 0; i < scores.size(); ++i) {
      INFO("pair " << i);
      CHECK(scores[i].tokens == int64_t(targets[i].size()) + 1);
      CHECK(scores[i].log_prob < 0);
      CHECK(scores[i].log_prob ==
            Approx(one_pair(model, sources[i], targets[i])).epsilon(1e-5).margin(1e-5));
    }
  }
}

TEST_CASE("scorer: unequal counts of sources and targets are refused", "[decode][scorer]") {
  Transformer model = tiny_model(5);
  CHECK_THROWS_WITH(forced_scores(*model, ForcedIds{kBos, kEos, kPad}, random_ids(2, 1, true, 1),
                                  random_ids(3, 2, false, 0), ForcedScoreOptions{}, {}),
                    Catch::Matchers::Contains("2 sources but 3 targets"));
}
