// Several weighted corpora as one training set (data/corpus_set.h): the per-epoch draw, a
// token cache per corpus, and batch plans over the draw.
#include "catch_torch.h"  // first: see the header

#include <algorithm>
#include <map>

#include "data/batch_plan.h"
#include "data/corpus_sampling.h"
#include "data/corpus_set.h"
#include "data/prepare.h"
#include "data_fixture.h"
#include "util/error.h"

using nmt::data::CorpusSet;

namespace {

/// Three corpora cut from the shipped sample (1000, 500 and 300 pairs before filtering),
/// prepared once with a token cache each.
struct ThreeCorpora {
  nmt::test::TempDir dir;
  nmt::data::PreparedData prepared;
  ThreeCorpora() {
    nmt::data::DataOptions o;
    auto part = [this](const std::string& name, int skip, int lines) {
      nmt::data::CorpusOptions c;
      c.name = name;
      for (auto [side, out] : {std::pair{std::string("en"), &c.src}, std::pair{std::string("de"), &c.tgt}}) {
        const auto all = nmt::test::head_of(dir, "ddtp.en-de.train." + side + ".gz", name + ".all." + side, skip + lines);
        std::ifstream in(all);
        std::string text, line;
        for (int i = 0; std::getline(in, line); ++i)
          if (i >= skip) text += line + "\n";
        *out = dir.write(name + "." + side, text).string();
      }
      return c;
    };
    o.train = {part("curated", 0, 1000), part("crawled", 1000, 500), part("backtranslated", 1500, 300)};
    o.train[0].weight = 1.0;
    o.train[1].weight = 2.0;
    o.train[2].weight = 0.5;
    o.vocab_size = 500;
    o.max_len = 100;
    prepared = nmt::data::prepare_data(o, dir.path() / "run", {2, 1});
  }
};

const ThreeCorpora& three_corpora() {
  static ThreeCorpora corpora;
  return corpora;
}

}  // namespace

TEST_CASE("each epoch draws from each corpus in proportion to its weight", "[data]") {
  const CorpusSet& set = three_corpora().prepared.train;
  REQUIRE(set.parts().size() == 3);
  const auto draws = set.draws();
  for (int64_t epoch : {1, 2}) {
    const std::vector<uint32_t> ids = set.draw(epoch, 7);
    std::vector<std::map<uint32_t, int>> seen(3);
    for (uint32_t id : ids) ++seen[set.part_of(id)][id];
    for (size_t p = 0; p < 3; ++p) {
      INFO("corpus " << set.parts()[p].name << ", epoch " << epoch);
      const int64_t n = set.parts()[p].cache.size();
      const double weight = set.parts()[p].weight;
      int64_t drawn = 0;
      for (const auto& [id, count] : seen[p]) drawn += count;
      CHECK(drawn == draws[p].drawn);
      CHECK(std::abs(double(drawn) - weight * double(n)) <= 0.5);  // within rounding
      // Weight 1: every pair once; weight 2: every pair twice; 0.5: half of them, once each.
      if (weight >= 1) CHECK(static_cast<int64_t>(seen[p].size()) == n);
      for (const auto& [id, count] : seen[p]) CHECK(count == static_cast<int>(weight >= 1 ? weight : 1));
    }
  }
  // Deterministic from seed and epoch; the half of the 0.5 corpus changes between epochs.
  CHECK(set.draw(3, 7) == set.draw(3, 7));
  CHECK(set.draw(3, 7) != set.draw(4, 7));
  CHECK(set.draw(3, 7) != set.draw(3, 8));
}

TEST_CASE("every corpus has its own token cache", "[data]") {
  const auto& corpora = three_corpora();
  std::vector<std::string> files;
  for (const auto& part : corpora.prepared.train.parts()) files.push_back(part.cache.path().filename().string());
  REQUIRE(files.size() == 3);
  CHECK(files[0].rfind("train-curated.", 0) == 0);
  CHECK(files[1].rfind("train-crawled.", 0) == 0);
  CHECK(files[2].rfind("train-backtranslated.", 0) == 0);
  // Pair ids run over the corpora in order.
  const CorpusSet& set = corpora.prepared.train;
  const int64_t first = set.parts()[0].cache.size();
  CHECK(set.part_of(first - 1) == 0);
  CHECK(set.part_of(first) == 1);
  CHECK(set.src_length(first) == set.parts()[1].cache.src_length(0));
  CHECK(set.tgt_id(first, 0) == set.parts()[1].cache.tgt_id(0, 0));
}

TEST_CASE("a plan over several corpora trains the drawn pairs, a single corpus all of its own",
          "[data]") {
  const CorpusSet& set = three_corpora().prepared.train;
  nmt::data::BatchPlanOptions o;
  o.max_tokens = 1024;
  o.world_size = 2;
  o.seed = 7;
  const nmt::data::BatchPlanner planner(set, o);
  const nmt::data::EpochPlan plan = planner.plan_epoch(1);
  const auto drawn = nmt::data::drawn_in_plan(set, plan);
  const auto expected = set.draws();
  for (size_t p = 0; p < 3; ++p) CHECK(drawn[p].drawn == expected[p].drawn);
  // One corpus of weight 1 draws 0..n-1: the planner sees exactly the token cache.
  const auto& cache = nmt::test::small_corpus().cache();
  const CorpusSet one(cache);
  const std::vector<uint32_t> ids = one.draw(5, 9);
  REQUIRE(static_cast<int64_t>(ids.size()) == cache.size());
  for (size_t i = 0; i < ids.size(); ++i) REQUIRE(ids[i] == i);
  CHECK_THROWS_AS(CorpusSet(std::vector<nmt::data::CorpusPart>{}), nmt::DataError);
}

TEST_CASE("a sampling temperature draws the tempered counts, deterministic per seed and epoch",
          "[data]") {
  const CorpusSet& plain = three_corpora().prepared.train;
  std::vector<nmt::data::CorpusPart> parts = plain.parts();
  const CorpusSet tempered(parts, 5.0);
  CHECK(tempered.temperature() == 5.0);
  std::vector<nmt::data::CorpusSize> sizes;
  int64_t total = 0;
  for (const auto& d : plain.draws()) {
    sizes.push_back({d.pairs, d.weight});
    total += d.drawn;
  }
  const std::vector<int64_t> expected = nmt::data::drawn_per_epoch(sizes, 5.0);
  const auto draws = tempered.draws();
  int64_t tempered_total = 0;
  for (size_t p = 0; p < 3; ++p) {
    CHECK(draws[p].drawn == expected[p]);
    tempered_total += draws[p].drawn;
  }
  CHECK(tempered_total == total);  // the epoch keeps its size
  // The smallest corpus (300 pairs at weight 0.5) gains share from the largest.
  CHECK(draws[2].drawn > plain.draws()[2].drawn);
  const std::vector<uint32_t> ids = tempered.draw(2, 7);
  std::vector<int64_t> seen(3);
  for (uint32_t id : ids) ++seen[tempered.part_of(id)];
  for (size_t p = 0; p < 3; ++p) CHECK(seen[p] == expected[p]);
  CHECK(tempered.draw(2, 7) == ids);
  CHECK(tempered.draw(3, 7) != ids);
}

TEST_CASE("the lowest temperature still draws a whole epoch, and a weight past what an epoch "
          "can count is refused naming its corpus",
          "[data]") {
  const CorpusSet& plain = three_corpora().prepared.train;
  std::vector<nmt::data::CorpusPart> parts = plain.parts();
  int64_t total = 0;
  for (const auto& d : plain.draws()) total += d.drawn;
  const CorpusSet lowest(parts, 0.01);  // the least data.sampling_temperature accepts
  int64_t drawn = 0;
  for (const auto& d : lowest.draws()) {
    CHECK(d.drawn >= 0);
    drawn += d.drawn;
  }
  CHECK(drawn == total);
  CHECK(static_cast<int64_t>(lowest.draw(1, 7).size()) == total);
  // weight x pairs past 2^32 - 1 (and past int64 when rounded): refused before any rounding.
  parts[1].weight = 1e300;
  CHECK_THROWS_WITH(CorpusSet(parts, 1.0),
                    Catch::Matchers::Contains("corpus crawled: weight 1e+300 x ") &&
                        Catch::Matchers::Contains("at most 2^32 - 1 are supported"));
}
