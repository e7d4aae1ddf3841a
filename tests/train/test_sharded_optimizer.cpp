// ShardedOptimizer (dist.sharding: optimizer): who owns which parameter, and that 2 and 4 CPU
// ranks (threads of this process, Gloo) train bit for bit as without sharding, with Adam's
// weight decay, clipping, accumulation and the moving average, while each rank keeps only its
// share of the state; the state a checkpoint collects is the unsharded one's, and it loads
// back sharded or not. Batches are made before the ranks start (no shared generator between
// threads), without dropout.
#include "catch_torch.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/ATen.h>

#include "data/batch_tensors.h"
#include "dist/launcher.h"
#include "dist/process_group.h"
#include "model/transformer.h"
#include "rank_threads.h"
#include "rank_updater_fixture.h"
#include "test_support.h"
#include "train/ema.h"
#include "train/optimizer.h"
#include "train/sharded_optimizer.h"
#include "train/updater.h"

using nmt::checkpoint::NamedTensors;
using nmt::train::ShardedOptimizer;
using nmt::train::Updater;
using nmt::train::UpdaterSetup;

namespace {

constexpr int64_t kUpdates = 3;
constexpr int64_t kUpdateFreq = 2;

UpdaterSetup setup(int rank, int world, std::shared_ptr<nmt::dist::Communicator> comm,
                   nmt::dist::Sharding sharding) {
  UpdaterSetup u = nmt::test::rank_setup(rank, world, std::move(comm), kUpdateFreq);
  u.dist.sharding = sharding;
  return u;
}

NamedTensors copies(const NamedTensors& tensors) {
  NamedTensors out;
  for (const auto& [name, t] : tensors) out.emplace_back(name, t.detach().clone());
  return out;
}

NamedTensors parameters_of(Updater& u) {
  NamedTensors out;
  for (const auto& item : u.model()->named_parameters())
    out.emplace_back(item.key(), item.value().detach().clone());
  return out;
}

/// True when both lists have the same names and bitwise equal tensors, in order.
bool same(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].first != b[i].first || !at::equal(a[i].second, b[i].second)) return false;
  return true;
}

/// What one rank saw of the unsharded and the sharded run.
struct RankResult {
  NamedTensors initial_params, plain_params, sharded_params;
  NamedTensors plain_average, sharded_average;
  NamedTensors plain_collected, sharded_collected;  ///< collect_state(rank == 0)
  NamedTensors sharded_own_state;                   ///< state(): this rank's share
  int64_t owned_elements = 0;
  bool sharded_is_sharded = false;
  bool own_share_loads = false;  ///< a fresh sharded optimizer loads its share of the whole
};

/// Both runs on one rank: the same initial parameters (the plain run's, copied into the
/// sharded one, whose moving average restarts there), kUpdates updates on the same batches.
RankResult train_both(int rank, int world, int port,
                      const std::vector<std::vector<nmt::data::BatchTensors>>& batches) {
  auto comm = nmt::test::connect_rank(port, rank, world);
  Updater plain(setup(rank, world, comm, nmt::dist::Sharding::kNone));
  Updater sharded(setup(rank, world, comm, nmt::dist::Sharding::kOptimizer));
  nmt::test::copy_parameters(plain, sharded);
  RankResult r;
  r.initial_params = parameters_of(plain);
  for (Updater* u : {&plain, &sharded}) {
    const nmt::train::BatchSource source = nmt::test::batches_in_order(batches[size_t(rank)]);
    nmt::train::IntervalStats interval = nmt::train::IntervalStats::zero(c10::kCPU);
    for (int64_t step = 1; step <= kUpdates; ++step) u->update(step, source, interval, false);
  }
  r.plain_params = parameters_of(plain);
  r.sharded_params = parameters_of(sharded);
  r.plain_average = copies(plain.average()->state());
  r.sharded_average = copies(sharded.average()->state());
  r.plain_collected = plain.optimizer().collect_state(rank == 0);
  r.sharded_collected = sharded.optimizer().collect_state(rank == 0);
  r.sharded_own_state = sharded.optimizer().state();
  const auto* shards = dynamic_cast<const ShardedOptimizer*>(&sharded.optimizer());
  r.sharded_is_sharded = shards != nullptr;
  if (shards) r.owned_elements = shards->owned_elements();
  // A fresh sharded optimizer takes its share of the whole (unsharded) state.
  const NamedTensors whole = plain.optimizer().state();
  std::map<std::string, at::Tensor, std::less<>> by_name(whole.begin(), whole.end());
  ShardedOptimizer fresh(copies(plain.optimizer().parameters()), setup(rank, world, comm, {}).train,
                         comm);
  fresh.load_state([&](std::string_view name) -> const at::Tensor* {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : &it->second;
  });
  r.own_share_loads = same(fresh.state(), r.sharded_own_state);
  return r;
}

}  // namespace

TEST_CASE("shard_owners deals the largest parameters first to the lightest rank",
          "[train][sharding]") {
  // 10 -> rank 0; 8 -> 1; 7 -> 1 (8 < 10); 3 -> 0 (10 < 15); 2 -> 0 (13 < 15).
  CHECK(nmt::train::shard_owners({10, 3, 7, 2, 8}, 2) == std::vector<int>{0, 0, 1, 0, 1});
  CHECK(nmt::train::shard_owners({10, 3, 7, 2, 8}, 1) == std::vector<int>{0, 0, 0, 0, 0});
  // Fewer parameters than ranks: ranks 2 and 3 own nothing.
  CHECK(nmt::train::shard_owners({5, 6}, 4) == std::vector<int>{1, 0});
  // Equal sizes alternate: the lowest rank wins a tie.
  CHECK(nmt::train::shard_owners({4, 4, 4, 4}, 2) == std::vector<int>{0, 1, 0, 1});
  CHECK_THROWS(nmt::train::shard_owners({1}, 0));
}

TEST_CASE(
    "sharded optimizer state trains bit for bit as unsharded on 2 and 4 ranks, each "
    "keeping its share",
    "[train][sharding][gloo]") {
  for (const int world : {2, 4}) {
    INFO(world << " ranks");
    const auto batches = nmt::test::rank_batches(world, kUpdates * kUpdateFreq);
    const int port = nmt::dist::find_free_port();
    std::vector<RankResult> results(static_cast<size_t>(world));
    const auto errors = nmt::test::run_ranks(
        world, [&](int rank) { results[size_t(rank)] = train_both(rank, world, port, batches); },
        std::chrono::seconds(120));
    nmt::test::require_no_errors(errors);
    int64_t owned = 0, total = 0;
    for (const auto& [name, p] : results[0].plain_params) total += p.numel();
    for (int rank = 0; rank < world; ++rank) {
      INFO("rank " << rank);
      const RankResult& r = results[size_t(rank)];
      REQUIRE(r.sharded_is_sharded);
      // The same parameters and moving average as without sharding, on every rank.
      CHECK(same(r.sharded_params, r.plain_params));
      CHECK(same(r.sharded_params, results[0].sharded_params));
      CHECK(same(r.sharded_average, r.plain_average));
      // Training moved them (the comparison compares something).
      CHECK_FALSE(same(r.plain_params, r.initial_params));
      // Each rank keeps Adam's three tensors for its own parameters only.
      int64_t state_elements = 0;
      for (const auto& [name, t] : r.sharded_own_state)
        if (t.dim() > 0) state_elements += t.numel();
      CHECK(state_elements == 2 * r.owned_elements);
      CHECK(r.owned_elements < total);
      owned += r.owned_elements;
      CHECK(r.own_share_loads);
      // Only the writer gets the collected state.
      if (rank != 0) CHECK(r.sharded_collected.empty());
    }
    CHECK(owned == total);  // every element owned once
    // The state a checkpoint collects is the unsharded one's: names, order and bits.
    CHECK(!results[0].plain_collected.empty());
    CHECK(same(results[0].sharded_collected, results[0].plain_collected));
  }
}
