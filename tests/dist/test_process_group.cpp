// Communicator over Gloo: 2 ranks as threads of this process, store on 127.0.0.1.
#include "catch_torch.h"
#include "skip.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include "dist/key_value_store.h"
#include "dist/launcher.h"
#include "dist/progress_marks.h"
#include "dist/process_group.h"
#include "dist/store_socket.h"
#include "rank_threads.h"
#include "test_support.h"
#include "util/error.h"

using namespace std::chrono_literals;
using nmt::dist::Communicator;
using nmt::dist::CommunicatorOptions;
using nmt::test::listening_addresses;
using nmt::test::message;
using nmt::test::require_no_errors;
using nmt::test::run_ranks;

namespace {

CommunicatorOptions options(int port, int rank, int world, std::chrono::milliseconds timeout = 10s) {
  CommunicatorOptions o;
  o.master_addr = "127.0.0.1";
  o.master_port = port;
  o.rank = rank;
  o.world_size = world;
  o.timeout = timeout;
  return o;
}

}  // namespace

TEST_CASE("all_reduce_sum sums tensors of several dtypes and layouts over 2 ranks", "[dist][gloo]") {
  const int port = nmt::dist::find_free_port();
  std::vector<std::vector<at::Tensor>> results(2);
  auto errors = run_ranks(2, [&](int r) {
    Communicator comm(options(port, r, 2));
    NMT_RANK_CHECK(comm.backend_name() == "gloo");
    std::vector<at::Tensor> t{at::full({3}, float(r + 1)),
                              at::arange(4, at::kLong) * (r + 1),
                              at::arange(6, at::kFloat).view({2, 3}).t() * (r + 1),  // strided
                              at::full({2}, double(10 * r))};
    comm.all_reduce_sum(t);
    at::Tensor flat = at::full({5}, float(r));
    comm.all_reduce_sum_async(flat)->wait();
    t.push_back(flat);
    results[r] = t;
  });
  require_no_errors(errors);
  for (int r = 0; r < 2; ++r) {
    const auto& t = results[r];
    CHECK(at::equal(t[0], at::full({3}, 3.0f)));
    CHECK(at::equal(t[1], at::arange(4, at::kLong) * 3));
    CHECK(at::equal(t[2], at::arange(6, at::kFloat).view({2, 3}).t() * 3));
    CHECK(at::equal(t[3], at::full({2}, 10.0, at::kDouble)));
    CHECK(at::equal(t[4], at::full({5}, 1.0f)));
  }
}

TEST_CASE("broadcast copies the root tensors, all_gather_strings and barrier work", "[dist][gloo]") {
  const int port = nmt::dist::find_free_port();
  std::vector<std::vector<at::Tensor>> tensors(2);
  std::vector<std::vector<std::string>> gathered(2), gathered2(2);
  auto errors = run_ranks(2, [&](int r) {
    Communicator comm(options(port, r, 2));
    std::vector<at::Tensor> t{at::full({2, 2}, float(r + 5)), at::full({3}, int64_t(r + 7))};
    comm.broadcast(t, /*root=*/1);
    tensors[r] = t;
    gathered[r] = comm.all_gather_strings(r == 0 ? "zero" : std::string("one\0bytes", 9));
    gathered2[r] = comm.all_gather_strings("again" + std::to_string(r));
    comm.barrier();
  });
  require_no_errors(errors);
  for (int r = 0; r < 2; ++r) {
    CHECK(at::equal(tensors[r][0], at::full({2, 2}, 6.0f)));
    CHECK(at::equal(tensors[r][1], at::full({3}, int64_t(8))));
    CHECK(gathered[r] == std::vector<std::string>{"zero", std::string("one\0bytes", 9)});
    CHECK(gathered2[r] == std::vector<std::string>{"again0", "again1"});
  }
}

TEST_CASE("collectives over more than 64 MiB of tensors copy them in pieces, with the same "
          "results",
          "[dist][gloo]") {
  // Five float tensors of 24 MiB and one of 80 MiB (alone: larger than a piece) in one call:
  // coalesced into pieces of at most 64 MiB, so no rank holds a flat copy of all 200 MiB.
  const int port = nmt::dist::find_free_port();
  std::vector<std::vector<at::Tensor>> reduced(2), broadcast(2);
  auto errors = run_ranks(2, [&](int r) {
    Communicator comm(options(port, r, 2, 60s));
    std::vector<at::Tensor> t;
    for (int i = 0; i < 5; ++i) t.push_back(at::full({6 << 20}, float(10 * i + r)));
    t.insert(t.begin() + 2, at::full({20 << 20}, float(100 + r)));
    std::vector<at::Tensor> b;
    for (const at::Tensor& x : t) b.push_back(x.clone());
    comm.all_reduce_sum(t);
    comm.broadcast(b, /*root=*/1);
    reduced[r] = t;
    broadcast[r] = b;
  });
  require_no_errors(errors);
  const std::vector<float> firsts{0, 10, 100, 20, 30, 40};
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    for (size_t i = 0; i < firsts.size(); ++i) {
      INFO("tensor " << i);
      CHECK(at::equal(reduced[r][i], at::full_like(reduced[r][i], 2 * firsts[i] + 1)));
      CHECK(at::equal(broadcast[r][i], at::full_like(broadcast[r][i], firsts[i] + 1)));
    }
  }
}

TEST_CASE("a rank that never joins fails the rendezvous within the timeout", "[dist][gloo]") {
  const int port = nmt::dist::find_free_port();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    Communicator comm(options(port, 0, 2, 2s));
    FAIL("rendezvous succeeded without rank 1");
  } catch (const nmt::DistError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("rank 0") != std::string::npos);
    CHECK(what.find("rendezvous with 127.0.0.1:" + std::to_string(port)) != std::string::npos);
    CHECK(what.find("missing: 1") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - t0 < 8s);
}

TEST_CASE("a client without a store host fails within the timeout", "[dist][gloo]") {
  const int port = nmt::dist::find_free_port();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    Communicator comm(options(port, 1, 2, 2s));
    FAIL("connected to a store nobody hosts");
  } catch (const nmt::DistError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("rank 1") != std::string::npos);
    CHECK(what.find("127.0.0.1:" + std::to_string(port)) != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
}

TEST_CASE("a peer that stops taking part makes the collective fail within the timeout",
          "[dist][gloo]") {
  const int port = nmt::dist::find_free_port();
  std::chrono::steady_clock::duration waited{};
  auto errors = run_ranks(2, [&](int r) {
    Communicator comm(options(port, r, 2, 2s));
    comm.barrier();
    if (r == 1) {
      std::this_thread::sleep_for(4s);  // alive, but never joins the all-reduce
      return;
    }
    std::vector<at::Tensor> t{at::ones({4})};
    const auto t0 = std::chrono::steady_clock::now();
    try {
      comm.all_reduce_sum(t);
    } catch (...) {
      waited = std::chrono::steady_clock::now() - t0;
      throw;
    }
  });
  const std::string what = message(errors[0]);
  INFO(what);
  CHECK(what.find("rank 0: all_reduce_sum") != std::string::npos);
  CHECK(message(errors[1]) == "");
  CHECK(waited < 6s);
}

TEST_CASE("a peer that exits makes the collective fail", "[dist][gloo]") {
  const int port = nmt::dist::find_free_port();
  auto errors = run_ranks(2, [&](int r) {
    Communicator comm(options(port, r, 2, 3s));
    comm.barrier();
    if (r == 1) return;  // destroys its process group: connections close
    std::this_thread::sleep_for(500ms);
    std::vector<at::Tensor> t{at::ones({4})};
    comm.all_reduce_sum(t);
  });
  const std::string what = message(errors[0]);
  INFO(what);
  CHECK(what.find("rank 0: all_reduce_sum") != std::string::npos);
}

TEST_CASE("NCCL without a usable GPU is a clear DistError, and with one it reduces", "[dist][cuda]") {
  CommunicatorOptions o = options(nmt::dist::find_free_port(), 0, 1, 2s);
  o.use_nccl = true;
  o.device = c10::Device(c10::kCUDA, 0);
  if (!at::hasCUDA() || at::getNumGPUs() == 0) {
    // The refusal of the options check, naming the cause; any other error (a broken NCCL)
    // would fail here, and on a GPU box everything below must work.
    CHECK_THROWS_MATCHES(Communicator(o), nmt::DistError,
                         Catch::Matchers::Predicate<nmt::DistError>(
                             [](const nmt::DistError& e) {
                               return std::string(e.what()).find("NCCL requested, but") !=
                                      std::string::npos;
                             },
                             "says NCCL was requested without CUDA"));
    NMT_SKIP_WITHOUT_CUDA("no CUDA device visible: the refusal checked, NCCL itself not run");
  }
  Communicator comm(o);  // with a GPU, any DistError fails the case
  // One rank: the sum is itself.
  std::vector<at::Tensor> tensors{at::full({3}, 2.5, at::TensorOptions().device(o.device))};
  comm.all_reduce_sum(tensors);
  CHECK(tensors[0].cpu().equal(at::full({3}, 2.5)));
  at::Tensor host = at::tensor({1.0, 2.0}, at::kDouble);
  comm.all_reduce_sum_host(host);
  CHECK(host.equal(at::tensor({1.0, 2.0}, at::kDouble)));
  comm.barrier();
}

TEST_CASE("invalid options are rejected before any network use", "[dist]") {
  CHECK_THROWS_AS(Communicator(options(1234, 2, 2)), nmt::DistError);
  CHECK_THROWS_AS(Communicator(options(0, 0, 2)), nmt::DistError);  // port 0: one rank only
}

TEST_CASE("the rendezvous store listens only on the address MASTER_ADDR names, loopback here",
          "[dist][gloo]") {
  Communicator comm(options(0, 0, 1));  // one rank: the store picks a free port
  const int port = comm.options().master_port;
  REQUIRE(port > 0);
  const std::vector<std::string> addresses = listening_addresses(port);
  INFO("port " << port);
  REQUIRE_FALSE(addresses.empty());
  for (const std::string& address : addresses) CHECK(address == "0100007F");  // 127.0.0.1
}

TEST_CASE("a store socket bound in advance is taken over by rank 0: the port cannot be lost",
          "[dist][gloo]") {
  const nmt::dist::StoreSocket bound = nmt::dist::listen_for_store("127.0.0.1", 0);
  CHECK(bound.address == "127.0.0.1");
  // Nobody else can have the port meanwhile.
  CHECK_THROWS_WITH(nmt::dist::listen_for_store("127.0.0.1", bound.port),
                    Catch::Matchers::Contains("cannot listen on 127.0.0.1:" +
                                              std::to_string(bound.port)));
  const auto errors = run_ranks(2, [&](int rank) {
    CommunicatorOptions o = options(bound.port, rank, 2);
    if (rank == 0) o.listen_fd = bound.fd;
    Communicator comm(o);
    const auto all = comm.all_gather_strings(std::to_string(rank));
    NMT_RANK_CHECK(all == std::vector<std::string>{"0", "1"});
    comm.barrier();
  });
  require_no_errors(errors);
}

TEST_CASE("the store keeps the first set_once value, and progress marks name who is behind",
          "[dist][gloo]") {
  const int port = nmt::dist::find_free_port();
  std::vector<std::string> reports(2);
  const auto errors = run_ranks(2, [&](int rank) {
    Communicator comm(options(port, rank, 2));
    const std::shared_ptr<nmt::dist::KeyValueStore> store = comm.store();
    NMT_RANK_CHECK(!store->get_if_set("test/first").has_value());  // nobody set it yet
    comm.barrier();
    if (rank == 1) NMT_RANK_CHECK(store->set_once("test/first", "one") == "one");
    comm.barrier();
    NMT_RANK_CHECK(store->get_if_set("test/first") == "one");
    NMT_RANK_CHECK(store->set_once("test/first", "zero") == "one");  // a later set keeps the first
    NMT_RANK_CHECK(comm.progress().report().empty());  // nothing marked yet
    comm.progress().mark("step 1: backward done");
    if (rank == 0) comm.progress().mark("step 2: backward done");
    comm.barrier();
    reports[static_cast<size_t>(rank)] = comm.progress().report();
    comm.barrier();
  });
  for (const auto& e : errors) CHECK(message(e) == "");
  CHECK(reports[0] == "; behind: rank 1 is at 'step 1: backward done'; the others are at "
                      "'step 2: backward done' (this is rank 0)");
  CHECK(reports[1] == "; behind: rank 1 is at 'step 1: backward done'; the others are at "
                      "'step 2: backward done' (this is rank 1)");
}

TEST_CASE("3 ranks of one host find each other at the rendezvous, then form a group on it",
          "[dist][gloo]") {
  const int port = nmt::dist::find_free_port();
  std::vector<nmt::dist::HostRanks> found(3);
  std::vector<double> sums(3);
  auto errors = run_ranks(3, [&](int r) {
    nmt::dist::Rendezvous joined(options(port, r, 3));
    found[r] = joined.host_ranks();
    Communicator comm(std::move(joined), options(port, r, 3));
    std::vector<at::Tensor> t{at::full({1}, double(r + 1))};
    comm.all_reduce_sum(t);
    sums[r] = t[0].item<double>();
  });
  require_no_errors(errors);
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(found[r].local_rank == r);
    CHECK(found[r].local_world_size == 3);
    CHECK(sums[r] == 6.0);
  }
}
