
#include "catch_torch.h"  // first: see the header

#include <ATen/ATen.h>

#include "data/batch_iterator.h"
#include "data/batch_tensors.h"
#include "data_fixture.h"
#include "util/error.h"

using nmt::data::BatchIterator;
using nmt::data::BatchPlanner;
using nmt::data::BatchPrefetcher;
using nmt::data::IteratorState;

namespace {

std::shared_ptr<const BatchPlanner> planner(int64_t world) {
  nmt::data::BatchPlanOptions o;
  o.max_tokens = 1024;
  o.world_size = world;
  o.seed = 3;
  return std::make_shared<const BatchPlanner>(nmt::test::small_corpus().cache(), o);
}

}  // namespace

TEST_CASE("a restored iterator state continues with exactly the next batch", "[data]") {
  auto p = planner(2);
  BatchIterator straight(p);
  const int64_t per_epoch = straight.steps_in_epoch();
  // Run into the second epoch, saving the state at several points.
  for (int64_t n : {int64_t{0}, int64_t{5}, per_epoch - 1, per_epoch, per_epoch + 3}) {
    INFO("after " << n << " steps");
    BatchIterator a(p);
    for (int64_t i = 0; i < n; ++i) a.next();
    const IteratorState saved = a.state();
    BatchIterator b(p, saved);
    for (int k = 0; k < 3; ++k) {
      const auto expected = a.next().batches;
      const auto& got = b.next().batches;
      REQUIRE(got.size() == expected.size());
      for (size_t r = 0; r < got.size(); ++r) CHECK(got[r].pairs == expected[r].pairs);
    }
    CHECK(a.state() == b.state());
  }
  CHECK_THROWS_AS(BatchIterator(p, IteratorState{1, per_epoch + 1}), nmt::DataError);
}

TEST_CASE("batch tensors are padded, EOS-terminated and BOS-shifted", "[data]") {
  const auto& cache = nmt::test::small_corpus().cache();
  auto p = planner(1);
  const auto plan = p->plan_epoch(1);
  const auto& batch = plan.steps.front().batches.front();
  const auto t = nmt::data::make_batch_tensors(cache, batch, {0, 2, 3});
  REQUIRE(t.src.sizes() == at::IntArrayRef({batch.size(), batch.src_len}));
  REQUIRE(t.tgt_in.sizes() == t.tgt_out.sizes());
  CHECK(t.src.ne(0).sum().item<int64_t>() == batch.src_tokens);
  CHECK(t.tgt_out.ne(0).sum().item<int64_t>() == batch.tgt_tokens);
  CHECK(t.tgt_out.eq(3).sum().item<int64_t>() == batch.size());  // one EOS per row
  CHECK(t.tgt_in.select(1, 0).eq(2).all().item<bool>());        // BOS first
  // Decoder input is the output shifted right by one.
  const int64_t pair = batch.pairs[0];
  const int64_t n = cache.tgt_length(pair);
  CHECK(at::equal(t.tgt_in[0].slice(0, 1, n + 1), t.tgt_out[0].slice(0, 0, n)));
}

TEST_CASE("the prefetcher yields the same batches as building them in order", "[data]") {
  const auto& cache = nmt::test::small_corpus().cache();
  auto p = planner(2);
  BatchIterator reference(p, {1, 4});
  BatchPrefetcher prefetcher(cache, p, /*rank=*/1, {1, 4}, {0, 2, 3}, /*depth=*/3);
  for (int i = 0; i < 2 * reference.steps_in_epoch(); ++i) {
    const auto& step = reference.next();
    const auto expected = nmt::data::make_batch_tensors(cache, step.batches[1], {0, 2, 3});
    const auto got = prefetcher.next();
    REQUIRE(at::equal(got.src, expected.src));
    REQUIRE(at::equal(got.tgt_out, expected.tgt_out));
    CHECK(got.global_tgt_tokens == step.global_tgt_tokens());
    CHECK(got.next == reference.state());
  }
}
