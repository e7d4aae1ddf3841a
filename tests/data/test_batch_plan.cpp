
#include "catch_torch.h"  // first: see the header

#include <limits>
#include <random>
#include <set>

#include "data/batch_iterator.h"  // format_consumed
#include "data/batch_plan.h"
#include "data/token_cache.h"
#include "data/token_cache_writer.h"
#include "data_fixture.h"
#include "test_support.h"
#include "util/error.h"
#include "util/hash.h"

using nmt::data::BatchPlanner;
using nmt::data::BatchPlanOptions;
using nmt::data::EpochPlan;

namespace {

BatchPlanOptions options_for(int64_t world, int64_t max_tokens = 1024) {
  BatchPlanOptions o;
  o.max_tokens = max_tokens;
  o.world_size = world;
  o.seed = 7;
  return o;
}

/// A token cache of `pairs` pairs with lengths drawn from a long-tailed distribution
/// (1-120 pieces), ids all 5: what planning sees of a corpus.
nmt::data::TokenCache synthetic_cache(const std::filesystem::path& file, int pairs, uint32_t seed) {
  std::mt19937 rng(seed);
  std::geometric_distribution<int> extra(0.05);
  nmt::data::TokenCacheWriter writer(file, 1, 2);
  std::vector<int32_t> src, tgt;
  for (int i = 0; i < pairs; ++i) {
    src.assign(static_cast<size_t>(1 + std::min(119, extra(rng))), 5);
    tgt.assign(static_cast<size_t>(std::max<int64_t>(
                   1, std::min<int64_t>(120, int64_t(src.size()) + int(rng() % 9) - 4))),
               5);
    writer.add(i + 1, src.data(), src.size(), tgt.data(), tgt.size());
  }
  nmt::data::FilterCounts counts;
  counts.read = pairs;
  writer.finish(counts);
  return nmt::data::TokenCache::open(file);
}

/// FNV-1a over every step's batches' pairs and shapes, rank by rank.
uint64_t plan_hash(const EpochPlan& plan) {
  nmt::Fnv1a64 h;
  for (const auto& step : nmt::test::steps_of(plan))
    for (const auto& batch : step.batches) {
      h.update_value(int64_t(batch.pairs.size()));
      for (uint32_t pair : batch.pairs) h.update_value(pair);
      h.update_value(batch.src_len);
      h.update_value(batch.tgt_len);
    }
  return h.digest();
}

}  // namespace

TEST_CASE("plans are those of the versions before (resumed runs continue with the same batches)",
          "[data]") {
  // Pinned from the planner as it was before the memory of planning was cut (a ring of
  // costs, 32-bit cuts, bucketed length order); those with accumulation, consumed updates or
  // sentence batching, and the epoch's tail below, from the one before plans were stored flat. A
  // resumed run plans its epoch again, so a change here would give a run continued by a newer
  // binary other batches than it began.
  nmt::test::TempDir dir;
  const auto cache = synthetic_cache(dir.path() / "c.tok", 20000, 11);
  using nmt::data::ConsumedUpdates;
  struct Pinned {
    int64_t world, accumulation, max_tokens, max_sentences, epoch;
    std::vector<ConsumedUpdates> consumed;
    nmt::data::Batching batching;
    uint64_t hash;
  };
  const auto tokens = nmt::data::Batching::kTokens;
  for (const Pinned& p :
       {Pinned{1, 1, 1024, 0, 1, {}, tokens, 16154414192570524606ull},
        Pinned{2, 1, 2048, 0, 1, {}, tokens, 4478746458168702848ull},
        Pinned{3, 1, 512, 16, 2, {}, tokens, 7383787418488170126ull},
        Pinned{8, 1, 4096, 0, 3, {}, tokens, 4877298766870635107ull},
        Pinned{2, 3, 1024, 0, 1, {}, tokens, 14738337919163197282ull},
        Pinned{1, 2, 2048, 0, 2, {{4, 5}}, tokens, 7642901545754620475ull},
        Pinned{3, 1, 512, 16, 1, {{2, 10}, {6, 3}}, tokens, 2842549396680345867ull},
        Pinned{2, 1, 2048, 0, 1, {}, nmt::data::Batching::kSentences, 10132815869127329169ull}}) {
    INFO("world " << p.world << " x " << p.accumulation << ", max_tokens " << p.max_tokens
                  << ", max_sentences " << p.max_sentences << ", epoch " << p.epoch
                  << ", consumed '" << nmt::data::format_consumed(p.consumed) << "', batching "
                  << int(p.batching));
    BatchPlanOptions o = options_for(p.world, p.max_tokens);
    o.accumulation = p.accumulation;
    o.max_sentences = p.max_sentences;
    o.batching = p.batching;
    const uint64_t hash = plan_hash(BatchPlanner(cache, o).plan_epoch(p.epoch, p.consumed));
    UNSCOPED_INFO("plan hash " << hash);
    CHECK(hash == p.hash);
  }
  // An epoch's tail after a resume, with fewer pairs left than an update's 64 batches: the
  // batches split down to single pairs, and empty ones fill the rest (their only path).
  const int64_t updates = BatchPlanner(cache, options_for(2, 512)).plan_epoch(1).num_steps();
  BatchPlanOptions tail = options_for(8, 512);
  tail.accumulation = 8;
  const EpochPlan rest = BatchPlanner(cache, tail).plan_epoch(1, {{2, updates - 1}});
  REQUIRE(rest.num_steps() == 8);
  REQUIRE(std::count_if(rest.spans.begin(), rest.spans.end(),
                        [](const EpochPlan::Span& s) { return s.size == 0; }) > 0);
  CHECK(plan_hash(rest) == 16854302044496798646ull);
}

TEST_CASE("a plan's batches are runs of one array of distinct pairs, shaped by their pairs",
          "[data]") {
  // The flat plan's point (memory): no pair is stored twice, the batches tile the array, and
  // each batch's stored shape is that of its pairs (the loss counts its target tokens).
  const auto& cache = nmt::test::small_corpus().cache();
  for (int64_t world : {1, 3}) {
    for (const std::vector<nmt::data::ConsumedUpdates>& consumed :
         {std::vector<nmt::data::ConsumedUpdates>{}, {{2, 3}}}) {
      INFO("world " << world << ", consumed " << consumed.size());
      const EpochPlan plan = BatchPlanner(cache, options_for(world)).plan_epoch(1, consumed);
      REQUIRE(plan.ranks == world);
      REQUIRE(static_cast<int64_t>(plan.spans.size()) == plan.num_steps() * world);
      std::vector<int> covered(plan.pairs.size(), 0);
      for (const auto& span : plan.spans) {
        REQUIRE(span.begin + span.size <= plan.pairs.size());
        int64_t src_len = 0, tgt_len = 0, src_tokens = 0, tgt_tokens = 0;
        for (uint64_t k = span.begin; k < span.begin + span.size; ++k) {
          ++covered[k];
          const uint32_t pair = plan.pairs[k];
          src_len = std::max(src_len, cache.src_length(pair) + 1);
          tgt_len = std::max(tgt_len, cache.tgt_length(pair) + 1);
          src_tokens += cache.src_length(pair) + 1;
          tgt_tokens += cache.tgt_length(pair) + 1;
        }
        CHECK(span.src_len == src_len);
        CHECK(span.tgt_len == tgt_len);
        CHECK(span.src_tokens == src_tokens);
        CHECK(span.tgt_tokens == tgt_tokens);
      }
      CHECK(std::all_of(covered.begin(), covered.end(), [](int n) { return n == 1; }));
      std::vector<uint32_t> distinct(plan.pairs.begin(), plan.pairs.end());
      std::sort(distinct.begin(), distinct.end());
      CHECK(std::adjacent_find(distinct.begin(), distinct.end()) == distinct.end());
      if (consumed.empty()) CHECK(static_cast<int64_t>(plan.pairs.size()) == cache.size());
      if (!consumed.empty()) CHECK(static_cast<int64_t>(plan.pairs.size()) < cache.size());
    }
  }
}

TEST_CASE("the length order is the same by buckets and by 16-byte keys", "[data]") {
  std::mt19937 rng(5);
  for (int n : {1, 2, 1000, 70000}) {
    for (int longest : {1, 7, 130, 1000}) {
      std::vector<int32_t> src(static_cast<size_t>(n)), tgt(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {  // many ties: few distinct lengths
        src[i] = 1 + int32_t(rng() % uint32_t(longest));
        tgt[i] = 1 + int32_t(rng() % uint32_t(longest));
      }
      for (uint64_t stream : {uint64_t{0}, uint64_t{0x9e3779b97f4a7c15}}) {
        INFO(n << " pairs, lengths 1-" << longest << ", stream " << stream);
        using nmt::data::LengthSort;
        const auto keys = nmt::data::length_order_of(src, tgt, stream, LengthSort::kKeys);
        CHECK(nmt::data::length_order_of(src, tgt, stream, LengthSort::kBuckets) == keys);
        CHECK(nmt::data::length_order_of(src, tgt, stream) == keys);
        std::vector<uint32_t> sorted = keys;
        std::sort(sorted.begin(), sorted.end());
        for (size_t i = 0; i < sorted.size(); ++i) REQUIRE(sorted[i] == i);  // a permutation
      }
    }
  }
}

TEST_CASE("batches respect the padded-token budget and cover every pair once", "[data]") {
  const auto& cache = nmt::test::small_corpus().cache();
  for (int64_t world : {1, 2, 3, 8}) {
    for (int64_t max_sentences : {0, 16}) {
      INFO("world " << world << ", max_sentences " << max_sentences);
      BatchPlanOptions o = options_for(world);
      o.max_sentences = max_sentences;
      const EpochPlan plan = BatchPlanner(cache, o).plan_epoch(1);
      std::vector<int> seen(static_cast<size_t>(cache.size()), 0);
      for (const auto& step : nmt::test::steps_of(plan)) {
        REQUIRE(step.batches.size() == static_cast<size_t>(world));
        for (const auto& batch : step.batches) {
          CHECK(batch.size() * std::max(batch.src_len, batch.tgt_len) <= o.max_tokens);
          if (max_sentences) CHECK(batch.size() <= max_sentences);
          for (uint32_t pair : batch.pairs) {
            ++seen[pair];
            CHECK(cache.src_length(pair) + 1 <= batch.src_len);
            CHECK(cache.tgt_length(pair) + 1 <= batch.tgt_len);
          }
        }
      }
      CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
    }
  }
}

TEST_CASE("a budget beyond the corpus plans in memory of the corpus's size", "[data]") {
  // The cost ring took max_tokens entries (8 GB a rank at data.max_tokens 10^9; INT64_MAX
  // threw std::length_error): a batch never reaches back past the epoch's first pair.
  const auto& cache = nmt::test::small_corpus().cache();
  for (int64_t world : {1, 2}) {
    INFO("world " << world);
    const EpochPlan plan =
        BatchPlanner(cache, options_for(world, std::numeric_limits<int64_t>::max())).plan_epoch(1);
    size_t pairs = 0;
    for (const auto& step : nmt::test::steps_of(plan))
      for (const auto& batch : step.batches) pairs += batch.pairs.size();
    CHECK(pairs == static_cast<size_t>(cache.size()));
  }
}

/// Every batch's pairs, in plan order.
std::vector<std::vector<uint32_t>> pairs_of(const EpochPlan& plan) {
  std::vector<std::vector<uint32_t>> out;
  for (const auto& step : nmt::test::steps_of(plan))
    for (const auto& batch : step.batches) out.push_back(batch.pairs);
  return out;
}

TEST_CASE("the same seed gives the same plan, epochs and seeds differ", "[data]") {
  const auto& cache = nmt::test::small_corpus().cache();
  const BatchPlanner a(cache, options_for(4)), b(cache, options_for(4));
  CHECK(pairs_of(a.plan_epoch(3)) == pairs_of(b.plan_epoch(3)));
  CHECK(pairs_of(a.plan_epoch(3)) != pairs_of(a.plan_epoch(4)));
  BatchPlanOptions other = options_for(4);
  other.seed = 8;
  CHECK(pairs_of(a.plan_epoch(3)) != pairs_of(BatchPlanner(cache, other).plan_epoch(3)));
}

TEST_CASE("ranks get near-equal padded tokens, far better than sentence-count batches",
          "[data]") {
  const auto& cache = nmt::test::small_corpus().cache();
  for (int64_t world : {2, 4}) {
    INFO("world " << world);
    const BatchPlanner planner(cache, options_for(world, 2048));
    const EpochPlan plan = planner.plan_epoch(1);
    const auto ours = plan.stats(2048);
    const auto naive = planner.plan_naive(plan).stats(2048);
    CHECK(ours.sentences == cache.size());
    CHECK(naive.sentences == cache.size());
    CHECK(ours.max_rank_token_imbalance >= 1.0);
    CHECK(ours.max_rank_token_imbalance < 1.06);
    CHECK(ours.padding_efficiency > 0.85);
    CHECK(ours.padding_efficiency > naive.padding_efficiency + 0.2);
    CHECK(ours.mean_batch_fill > 0.7);
    CHECK(ours.mean_batch_fill <= 1.0);
  }
}

TEST_CASE("batching by sentences plans the naive batches, for comparison runs", "[data]") {
  const auto& cache = nmt::test::small_corpus().cache();
  BatchPlanOptions options = options_for(2, 2048);
  const BatchPlanner tokens(cache, options);
  options.batching = nmt::data::Batching::kSentences;
  const BatchPlanner sentences(cache, options);
  const EpochPlan naive = sentences.plan_epoch(1);
  CHECK(pairs_of(naive) == pairs_of(tokens.plan_naive(tokens.plan_epoch(1))));
  CHECK(naive.stats(2048).sentences == cache.size());
  CHECK(naive.stats(2048).padding_efficiency < tokens.plan_epoch(1).stats(2048).padding_efficiency);
}

TEST_CASE("global target tokens of a step sum every rank's batch", "[data]") {
  const auto& cache = nmt::test::small_corpus().cache();
  const EpochPlan plan = BatchPlanner(cache, options_for(3)).plan_epoch(1);
  int64_t total = 0;
  for (const auto& step : nmt::test::steps_of(plan)) total += step.global_tgt_tokens();
  int64_t expected = 0;
  for (int64_t i = 0; i < cache.size(); ++i) expected += cache.tgt_length(i) + 1;
  CHECK(total == expected);
}

TEST_CASE("impossible plans are refused with the reason", "[data]") {
  const auto& cache = nmt::test::small_corpus().cache();
  CHECK_THROWS_WITH(BatchPlanner(cache, options_for(1, 8)),
                    Catch::Matchers::Contains("does not fit data.max_tokens 8"));
  CHECK_THROWS_WITH(BatchPlanner(cache, options_for(cache.size() + 1)),
                    Catch::Matchers::Contains("cannot give each of"));
}

TEST_CASE("Hilbert index visits the 2x2 square in curve order", "[data]") {
  CHECK(nmt::data::hilbert_index(0, 0, 1) == 0);
  CHECK(nmt::data::hilbert_index(0, 1, 1) == 1);
  CHECK(nmt::data::hilbert_index(1, 1, 1) == 2);
  CHECK(nmt::data::hilbert_index(1, 0, 1) == 3);
  // Neighbouring cells on the curve are neighbours in the plane.
  std::set<uint64_t> indices;
  for (uint32_t x = 0; x < 8; ++x)
    for (uint32_t y = 0; y < 8; ++y) indices.insert(nmt::data::hilbert_index(x, y, 3));
  CHECK(indices.size() == 64);
  CHECK(*indices.rbegin() == 63);
}

TEST_CASE("2 ranks x 1 step and 1 rank x 2 steps see the same sentences per update", "[data]") {
  const auto& cache = nmt::test::small_corpus().cache();
  BatchPlanOptions two_ranks = options_for(2);
  BatchPlanOptions accumulate = options_for(1);
  accumulate.accumulation = 2;
  const EpochPlan a = BatchPlanner(cache, two_ranks).plan_epoch(2);
  const EpochPlan b = BatchPlanner(cache, accumulate).plan_epoch(2);
  REQUIRE(b.num_steps() == 2 * a.num_steps());
  for (int64_t u = 0; u < a.num_steps(); ++u) {
    CHECK(a.batch(u, 0).pairs == b.batch(2 * u, 0).pairs);
    CHECK(a.batch(u, 1).pairs == b.batch(2 * u + 1, 0).pairs);
  }
}
