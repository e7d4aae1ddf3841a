// An update in which a rank runs out of memory is skipped by every rank together
// (train/oom_skip.h): the fault variable's grammar, the count and its limit, and 2 CPU ranks
// (threads, Gloo) whose rank 1 fails in forward, or in the middle of backward after some
// gradient buckets were launched: nobody hangs, nobody steps, and the run goes on as if that
// update's batches had never come.
#include "catch_torch.h"

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "dist/launcher.h"
#include "rank_threads.h"
#include "rank_updater_fixture.h"
#include "train/oom_skip.h"
#include "train/updater.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::train::FaultPhase;
using nmt::train::OomFault;
using nmt::train::Updater;

namespace {

constexpr int64_t kUpdateFreq = 2;

std::vector<at::Tensor> parameter_copies(Updater& u) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : u.model()->parameters()) out.push_back(p.detach().clone());
  return out;
}

bool same(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!at::equal(a[i], b[i])) return false;
  return true;
}

/// What one rank's runs left.
struct Outcome {
  std::vector<at::Tensor> faulty, reference, initial;
  int64_t skipped = 0, interval_skips = 0, interval_updates = 0;
};

/// On each rank: a run of updates 1-3 where rank 1 fails in update 2 (at `phase`), and a
/// reference run of updates 1 and 3 alone on the same batches, from the same parameters.
Outcome run_rank(int rank, int port, FaultPhase phase,
                 const std::vector<std::vector<nmt::data::BatchTensors>>& batches) {
  auto comm = nmt::test::connect_rank(port, rank, 2);
  nmt::train::UpdaterSetup plain = nmt::test::rank_setup(rank, 2, comm, kUpdateFreq);
  // Buckets of 2 kB: several, so that a failure in the middle of backward follows launches.
  plain.dist.bucket_mb = 0.002;
  nmt::train::UpdaterSetup faulty_setup = plain;
  faulty_setup.oom_faults = {OomFault{1, 2, phase}};
  Updater faulty(faulty_setup);
  Updater reference(plain);
  nmt::test::copy_parameters(faulty, reference);
  Outcome out;
  out.initial = parameter_copies(faulty);
  const auto& mine = batches[size_t(rank)];
  nmt::train::IntervalStats interval = nmt::train::IntervalStats::zero(c10::kCPU);
  const nmt::train::BatchSource all = nmt::test::batches_in_order(mine);
  for (int64_t step = 1; step <= 3; ++step) faulty.update(step, all, interval, false);
  // Updates 1 and 3 alone: batches 0-1 and 4-5.
  std::vector<nmt::data::BatchTensors> kept{mine[0], mine[1], mine[4], mine[5]};
  nmt::train::IntervalStats unused = nmt::train::IntervalStats::zero(c10::kCPU);
  const nmt::train::BatchSource some = nmt::test::batches_in_order(kept);
  for (int64_t step : {1, 3}) reference.update(step, some, unused, false);
  out.faulty = parameter_copies(faulty);
  out.reference = parameter_copies(reference);
  out.skipped = faulty.oom_skipped_updates();
  out.interval_skips = interval.oom_skips;
  out.interval_updates = interval.updates;
  return out;
}

}  // namespace

TEST_CASE("NMT_FAULT_OOM reads RANK:STEP[:forward|backward] entries and names a bad one",
          "[train][oom]") {
  const auto faults = nmt::train::parse_oom_faults("1:3,0:12:backward,2:1:forward");
  REQUIRE(faults.size() == 3);
  CHECK((faults[0].rank == 1 && faults[0].step == 3 && faults[0].phase == FaultPhase::kForward));
  CHECK((faults[1].rank == 0 && faults[1].step == 12 && faults[1].phase == FaultPhase::kBackward));
  CHECK(faults[2].phase == FaultPhase::kForward);
  CHECK(nmt::train::parse_oom_faults("").empty());
  for (const char* bad :
       {"1", "x:2", "1:0", "-1:2", "1:2:sideways", "1:2:forward:3", "1:2,", "1:2,,3:4"}) {
    INFO(bad);
    CHECK_THROWS_WITH(nmt::train::parse_oom_faults(bad), Contains("NMT_FAULT_OOM"));
  }
}

TEST_CASE("OomSkips counts the skipped updates and stops after max_oom_skips in a row",
          "[train][oom]") {
  nmt::train::OomSkips skips(2);
  CHECK_FALSE(skips.record(1, {"", ""}));
  CHECK(skips.record(2, {"", "forward of a batch of 3 sentences"}));
  CHECK(skips.total() == 1);
  CHECK(skips.in_row() == 1);
  CHECK_FALSE(skips.record(3, {"", ""}));  // a good update ends the row
  CHECK(skips.in_row() == 0);
  CHECK(skips.record(4, {"backward of a batch of 8 sentences", ""}));
  CHECK_THROWS_WITH(skips.record(5, {"", "forward of a batch of 9 sentences x 70 source"}),
                    Contains("2 update(s) in a row") &&
                        Contains("rank 1: forward of a batch of 9 sentences x 70 source") &&
                        Contains("data.max_tokens"));
}

TEST_CASE(
    "a rank out of memory in forward or mid-backward: both ranks skip that update and "
    "go on as without its batches",
    "[train][oom][gloo]") {
  for (const FaultPhase phase : {FaultPhase::kForward, FaultPhase::kBackward}) {
    INFO((phase == FaultPhase::kForward ? "forward" : "backward"));
    const auto batches = nmt::test::rank_batches(2, 3 * kUpdateFreq);
    const int port = nmt::dist::find_free_port();
    std::vector<Outcome> out(2);
    // A hang fails here: run_ranks stops waiting after 120 s.
    nmt::test::require_no_errors(nmt::test::run_ranks(
        2, [&](int rank) { out[size_t(rank)] = run_rank(rank, port, phase, batches); },
        std::chrono::seconds(120)));
    for (int rank = 0; rank < 2; ++rank) {
      INFO("rank " << rank);
      const Outcome& o = out[size_t(rank)];
      CHECK(o.skipped == 1);
      CHECK(o.interval_skips == 1);
      CHECK(o.interval_updates == 3);
      CHECK(same(o.faulty, o.reference));  // update 2 left nothing behind
      CHECK(same(o.faulty, out[0].faulty));
      CHECK_FALSE(same(o.faulty, o.initial));  // updates 1 and 3 did train
    }
  }
}

TEST_CASE("out of memory in max_oom_skips updates in a row stops every rank, naming the batch",
          "[train][oom][gloo]") {
  const auto batches = nmt::test::rank_batches(2, 2 * kUpdateFreq);
  const int port = nmt::dist::find_free_port();
  const auto errors = nmt::test::run_ranks(
      2,
      [&](int rank) {
        auto comm = nmt::test::connect_rank(port, rank, 2);
        nmt::train::UpdaterSetup u = nmt::test::rank_setup(rank, 2, comm, kUpdateFreq);
        u.train.max_oom_skips = 2;
        u.oom_faults = {OomFault{0, 1, FaultPhase::kForward},
                        OomFault{0, 2, FaultPhase::kBackward}};
        Updater updater(u);
        nmt::train::IntervalStats interval = nmt::train::IntervalStats::zero(c10::kCPU);
        const nmt::train::BatchSource source = nmt::test::batches_in_order(batches[size_t(rank)]);
        for (int64_t step = 1; step <= 2; ++step) updater.update(step, source, interval, false);
      },
      std::chrono::seconds(120));
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    const std::string message = nmt::test::message(errors[size_t(rank)]);
    CHECK_THAT(message, Contains("out of memory in 2 update(s) in a row") &&
                            Contains("rank 0: backward of a batch of") &&
                            Contains("data.max_tokens"));
  }
}
