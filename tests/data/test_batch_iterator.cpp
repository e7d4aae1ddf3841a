
#include "catch_torch.h"  // first: see the header

#include <algorithm>

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

TEST_CASE("iterators over one planner plan an epoch once and step through the same plan",
          "[data]") {
  // amp.mode auto's timing and the training after it each iterate epoch 1 from its start
  // (train/run_setup.h): with one planner, the epoch is planned once.
  auto p = planner(2);
  BatchIterator first(p);
  const int64_t steps = first.steps_in_epoch();
  BatchIterator second(p);
  CHECK(p->plans_made() == 1);
  const auto fresh = planner(2)->plan_epoch(1);
  REQUIRE(fresh.num_steps() == steps);
  for (int64_t i = 0; i < steps; ++i) {
    const auto a = first.next().batches;
    const auto& b = second.next().batches;
    REQUIRE(a.size() == b.size());
    for (size_t r = 0; r < a.size(); ++r) {
      CHECK(a[r].pairs == b[r].pairs);
      CHECK(a[r].pairs == fresh.batch(i, static_cast<int64_t>(r)).pairs);
    }
  }
  // Both are in epoch 2 now: it is planned once as well, and epoch 1 is no longer kept.
  CHECK(first.state().epoch == 2);
  first.next();
  second.next();
  CHECK(p->plans_made() == 2);
  // Another position (a resume under another global batch) is planned for itself.
  BatchIterator resumed(p, IteratorState{1, 0, {{4, 1}}});
  CHECK(p->plans_made() == 3);
}

TEST_CASE("batch tensors are padded, EOS-terminated and BOS-shifted", "[data]") {
  const auto& cache = nmt::test::small_corpus().cache();
  auto p = planner(1);
  const auto plan = p->plan_epoch(1);
  const auto batch = plan.batch(0, 0);
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

namespace nmt::data {
// For Catch's messages (c10 defines operator<< for vectors of printable things).
std::ostream& operator<<(std::ostream& os, const ConsumedUpdates& c) {
  return os << c.group << ':' << c.updates;
}
}  // namespace nmt::data

namespace {

std::shared_ptr<const BatchPlanner> planner(int64_t world, int64_t accumulation) {
  nmt::data::BatchPlanOptions o;
  o.max_tokens = 1024;
  o.world_size = world;
  o.accumulation = accumulation;
  o.seed = 3;
  return std::make_shared<const BatchPlanner>(nmt::test::small_corpus().cache(), o);
}

/// The pairs of the next `updates` updates of `it`, one sorted list per update.
std::vector<std::vector<uint32_t>> next_updates(BatchIterator& it, int64_t accumulation,
                                                int64_t updates) {
  std::vector<std::vector<uint32_t>> out;
  for (int64_t u = 0; u < updates; ++u) {
    std::vector<uint32_t> pairs;
    for (int64_t k = 0; k < accumulation; ++k)
      for (const auto& batch : it.next().batches) pairs.insert(pairs.end(), batch.pairs.begin(), batch.pairs.end());
    std::sort(pairs.begin(), pairs.end());
    out.push_back(std::move(pairs));
  }
  return out;
}

}  // namespace

TEST_CASE("a resume on other ranks x update_freq of the same product continues the same updates",
          "[data]") {
  // Saved by 2 ranks x 1 after 7 updates; resumed as 1 rank x 2 (and back the other way).
  BatchIterator two(planner(2, 1));
  next_updates(two, 1, 7);
  const IteratorState saved = two.state();
  const IteratorState mapped = nmt::data::continue_position(saved, 2, 1, 1, 2);
  CHECK(mapped.epoch == saved.epoch);
  CHECK(mapped.step == 14);
  CHECK(mapped.consumed.empty());
  BatchIterator one(planner(1, 2), mapped);
  CHECK(next_updates(one, 2, 5) == next_updates(two, 1, 5));
  const IteratorState back = nmt::data::continue_position(one.state(), 1, 2, 2, 1);
  CHECK(back.step == two.state().step);
}

TEST_CASE("a resume with another global batch trains every pair of the epoch exactly once",
          "[data]") {
  const auto& cache = nmt::test::small_corpus().cache();
  // 2 ranks for 6 updates, then 3 ranks x 2 for 4 updates, then 1 rank to the end of the epoch.
  BatchIterator first(planner(2, 1));
  std::vector<int> seen(static_cast<size_t>(cache.size()), 0);
  auto count = [&seen](const std::vector<std::vector<uint32_t>>& updates) {
    for (const auto& update : updates)
      for (uint32_t pair : update) ++seen[pair];
  };
  count(next_updates(first, 1, 6));
  IteratorState state = nmt::data::continue_position(first.state(), 2, 1, 3, 2);
  REQUIRE(state.consumed.size() == 1);
  CHECK(state.consumed[0].group == 2);
  CHECK(state.consumed[0].updates == 6);
  CHECK(state.step == 0);
  BatchIterator second(planner(3, 2), state);
  count(next_updates(second, 2, 4));
  state = nmt::data::continue_position(second.state(), 3, 2, 1, 1);
  REQUIRE(state.consumed.size() == 2);
  // Saving and restoring the position text keeps it.
  CHECK(nmt::data::parse_consumed(nmt::data::format_consumed(state.consumed)) == state.consumed);
  CHECK(nmt::data::format_consumed(state.consumed) == "2:6,6:4");
  BatchIterator third(planner(1, 1), state);
  while (third.state().epoch == 1 && third.state().step < third.steps_in_epoch())
    count(next_updates(third, 1, 1));
  CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  // The next epoch is whole again.
  third.next();
  CHECK(third.state().epoch == 2);
  CHECK(third.state().consumed.empty());
}

TEST_CASE("malformed consumed-updates text and positions inside an update are refused", "[data]") {
  CHECK(nmt::data::parse_consumed("").empty());
  for (const char* bad : {"x", "2:", "2:3:4", "0:5", "2:-1", "2:3,", "2:3x"})
    CHECK_THROWS_AS(nmt::data::parse_consumed(bad), nmt::DataError);
  CHECK_THROWS_AS(nmt::data::continue_position(IteratorState{1, 3, {}}, 1, 2, 2, 1), nmt::DataError);
}

TEST_CASE("after an epoch's last step the position is the next epoch's start", "[data]") {
  // So a run with train.max_epochs stops right after its last epoch, not one update into the
  // next (a bug until the elastic-resume work found it).
  BatchIterator it(planner(2));
  const int64_t per_epoch = it.steps_in_epoch();
  for (int64_t i = 0; i + 1 < per_epoch; ++i) it.next();
  CHECK(it.state() == IteratorState{1, per_epoch - 1, {}});
  it.next();
  CHECK(it.last_epoch() == 1);
  CHECK(it.state() == IteratorState{2, 0, {}});
  it.next();
  CHECK(it.last_epoch() == 2);
  CHECK(it.state() == IteratorState{2, 1, {}});
  // A position saved at the end of an epoch by an older version continues with the next one.
  BatchIterator old_style(planner(2), IteratorState{1, per_epoch, {}});
  BatchIterator fresh(planner(2), IteratorState{2, 0, {}});
  CHECK(old_style.next().batches[0].pairs == fresh.next().batches[0].pairs);
}
