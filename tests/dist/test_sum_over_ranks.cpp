// sum_over_ranks: fields of the caller's struct summed over the ranks in one all-reduce; 2
// Gloo ranks as threads of this process.
#include "catch_torch.h"

#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <vector>

#include "dist/launcher.h"
#include "dist/process_group.h"
#include "dist/sum_over_ranks.h"

using nmt::dist::SummedField;
using nmt::dist::sum_over_ranks;

namespace {

/// A caller's struct of mixed fields.
struct Figures {
  double loss = 0;
  int64_t tokens = 0;
  double flops = 0;
};

}  // namespace

TEST_CASE("sum_over_ranks without a communicator leaves every field as it is", "[dist]") {
  Figures f{2.5, 7, 1e12};
  sum_over_ranks(nullptr, {f.loss, f.tokens, f.flops});
  CHECK(f.loss == 2.5);
  CHECK(f.tokens == 7);
  CHECK(f.flops == 1e12);
  std::vector<double> slots = nmt::dist::own_slot(1, 3, 4.5);
  CHECK(slots == std::vector<double>{0.0, 4.5, 0.0});
  CHECK_THROWS(nmt::dist::own_slot(3, 3, 1.0));  // no such rank
}

TEST_CASE("a SummedField reads and writes the caller's double or int64_t", "[dist]") {
  double d = 1.5;
  int64_t i = (int64_t{1} << 52) + 1;  // exact as a double
  const SummedField a(d), b(i);
  CHECK(a.get() == 1.5);
  CHECK(b.get() == double((int64_t{1} << 52) + 1));
  a.set(3.25);
  b.set(double((int64_t{1} << 53)));
  CHECK(d == 3.25);
  CHECK(i == (int64_t{1} << 53));
}

TEST_CASE("sum_over_ranks sums each field over 2 Gloo ranks and gathers per-rank slots",
          "[dist][gloo]") {
  const int port = nmt::dist::find_free_port();
  std::vector<Figures> figures(2);
  std::vector<std::vector<double>> peaks(2);
  const auto body = [&](int rank) {
    nmt::dist::CommunicatorOptions o;
    o.master_port = port;
    o.rank = rank;
    o.world_size = 2;
    o.timeout = std::chrono::seconds(20);
    nmt::dist::Communicator comm(o);
    Figures f{0.25 + rank, 1000 + rank, 1e15 * (rank + 1)};
    std::vector<double> peak = nmt::dist::own_slot(rank, 2, 100.0 * (rank + 1));
    std::vector<SummedField> fields = {f.loss, f.tokens, f.flops};
    nmt::dist::append_fields(fields, peak);
    sum_over_ranks(&comm, fields);
    figures[static_cast<size_t>(rank)] = f;
    peaks[static_cast<size_t>(rank)] = peak;
  };
  auto rank0 = std::async(std::launch::async, body, 0);
  auto rank1 = std::async(std::launch::async, body, 1);
  REQUIRE(rank0.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
  REQUIRE(rank1.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
  rank0.get();
  rank1.get();
  for (const Figures& f : figures) {
    CHECK(f.loss == 1.5);
    CHECK(f.tokens == 2001);
    CHECK(f.flops == 3e15);
  }
  for (const std::vector<double>& p : peaks) CHECK(p == std::vector<double>{100.0, 200.0});
}
