// Epoch plans shared through files (data/plan_file.h): written and mapped back unchanged, made
// once by the planners of a folder, refused or planned again when a file is not a plan.

#include "catch_torch.h"  // first: see the header

#include <cstring>
#include <thread>

#include "data/batch_plan.h"
#include "data/plan_file.h"
#include "data_fixture.h"
#include "test_support.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::data::BatchPlanner;
using nmt::data::BatchPlanOptions;
using nmt::data::EpochPlan;
using nmt::test::small_corpus;
using nmt::test::steps_of;
using nmt::test::TempDir;

namespace {

BatchPlanOptions two_ranks() {
  BatchPlanOptions o;
  o.max_tokens = 1024;
  o.world_size = 2;
  o.accumulation = 2;
  o.seed = 5;
  return o;
}

/// The same steps, batch by batch (pairs and shapes), and the same epoch and ranks.
void require_same_plan(const EpochPlan& a, const EpochPlan& b) {
  REQUIRE(a.epoch == b.epoch);
  REQUIRE(a.ranks == b.ranks);
  REQUIRE(a.num_steps() == b.num_steps());
  const auto sa = steps_of(a), sb = steps_of(b);
  for (size_t s = 0; s < sa.size(); ++s)
    for (size_t r = 0; r < sa[s].batches.size(); ++r) {
      const auto &x = sa[s].batches[r], &y = sb[s].batches[r];
      REQUIRE(x.pairs == y.pairs);
      REQUIRE(x.src_len == y.src_len);
      REQUIRE(x.tgt_len == y.tgt_len);
      REQUIRE(x.src_tokens == y.src_tokens);
      REQUIRE(x.tgt_tokens == y.tgt_tokens);
    }
}

int plan_files_in(const std::filesystem::path& dir) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".bin") ++count;
  return count;
}

}  // namespace

TEST_CASE("plan files: a plan written and mapped back is the plan made in memory",
          "[data][plan_file]") {
  TempDir dir;
  const BatchPlanner planner(small_corpus().cache(), two_ranks());
  const EpochPlan made = planner.plan_epoch(3);
  const auto file = dir.path() / nmt::data::plan_file_name(42);
  nmt::data::write_plan_file(file, made, 42);
  CHECK(std::filesystem::file_size(file) ==
        56 + made.spans.size() * sizeof(EpochPlan::Span) + made.pairs.size() * 4);
  const EpochPlan mapped = nmt::data::map_plan_file(file, 42);
  CHECK(mapped.pairs.mapped());
  CHECK_FALSE(made.pairs.mapped());
  require_same_plan(made, mapped);
  // Equal plans are equal files: the spans' padding is written as zeros.
  const auto again = dir.path() / "again.bin";
  nmt::data::write_plan_file(again, mapped, 42);
  CHECK(nmt::test::read_file(again) == nmt::test::read_file(file));
}

TEST_CASE(
    "plan files: another key, a truncated file or a batch past the pairs is refused naming the "
    "file",
    "[data][plan_file]") {
  TempDir dir;
  const BatchPlanner planner(small_corpus().cache(), two_ranks());
  const auto file = dir.path() / "p.bin";
  nmt::data::write_plan_file(file, planner.plan_epoch(1), 7);
  CHECK_THROWS_WITH(nmt::data::map_plan_file(file, 8), Contains("p.bin") && Contains("key"));
  const std::string bytes = nmt::test::read_file(file);
  dir.write("short.bin", bytes.substr(0, bytes.size() - 4));
  CHECK_THROWS_WITH(nmt::data::map_plan_file(dir.path() / "short.bin", 7),
                    Contains("short.bin") && Contains("truncated"));
  std::string damaged = bytes;
  const uint64_t past = uint64_t{1} << 40;  // the first span's begin, right after the header
  std::memcpy(&damaged[56], &past, sizeof(past));
  dir.write("damaged.bin", damaged);
  CHECK_THROWS_WITH(nmt::data::map_plan_file(dir.path() / "damaged.bin", 7),
                    Contains("damaged.bin") && Contains("outside"));
  dir.write("text.bin", "not a plan at all, but long enough to hold a header of 56 bytes......");
  CHECK_THROWS_AS(nmt::data::map_plan_file(dir.path() / "text.bin", 7), nmt::DataError);
}

TEST_CASE("plan files: planners sharing a folder plan each epoch once and all map that plan",
          "[data][plan_file]") {
  // Two planners stand for two ranks of a node: one plans, the other waits and maps.
  TempDir dir;
  const BatchPlanner reference(small_corpus().cache(), two_ranks());
  const BatchPlanner rank0(small_corpus().cache(), two_ranks(), dir.path());
  const BatchPlanner rank1(small_corpus().cache(), two_ranks(), dir.path());
  std::shared_ptr<const EpochPlan> plans[2];
  {
    std::thread other([&] { plans[1] = rank1.shared_plan(1); });
    plans[0] = rank0.shared_plan(1);
    other.join();
  }
  CHECK(rank0.plans_made() + rank1.plans_made() == 1);
  const EpochPlan expected = reference.plan_epoch(1);
  for (const auto& plan : plans) {
    CHECK(plan->pairs.mapped());
    require_same_plan(expected, *plan);
  }
  CHECK(plan_files_in(dir.path()) == 1);
  // The next epoch's file replaces the last one's; the mapped plan of epoch 1 stays readable.
  const auto epoch2 = rank1.shared_plan(2);
  CHECK(rank0.shared_plan(2)->pairs.data() != nullptr);
  CHECK(rank0.plans_made() + rank1.plans_made() == 2);
  CHECK(plan_files_in(dir.path()) == 1);
  require_same_plan(expected, *plans[0]);
  require_same_plan(reference.plan_epoch(2), *epoch2);
  // A resume that continues epoch 2 under another global batch has a plan of its own.
  CHECK(rank0.plan_key(2, {{4, 3}}) != rank0.plan_key(2, {}));
  CHECK(rank0.plan_key(2, {}) != rank0.plan_key(3, {}));
  BatchPlanOptions other_seed = two_ranks();
  other_seed.seed = 6;
  CHECK(BatchPlanner(small_corpus().cache(), other_seed, dir.path()).plan_key(2, {}) !=
        rank0.plan_key(2, {}));
}

TEST_CASE("plan files: a damaged plan file is planned again, and dead writers' temporary files go",
          "[data][plan_file]") {
  TempDir dir;
  const BatchPlanner reference(small_corpus().cache(), two_ranks());
  const BatchPlanner planner(small_corpus().cache(), two_ranks(), dir.path());
  const std::string name = nmt::data::plan_file_name(planner.plan_key(1, {}));
  dir.write(name, "a plan file cut short by a full disk, long enough for the 56-byte header.");
  const auto dead_temp = dir.write(name + ".tmp-999999999", "half a plan");
  const auto plan = planner.shared_plan(1);
  CHECK(planner.plans_made() == 1);
  require_same_plan(reference.plan_epoch(1), *plan);
  CHECK_FALSE(std::filesystem::exists(dead_temp));
}
