// GradientReducer over Gloo: 2 ranks as threads of this process, a tiny two-layer net whose
// weights and inputs are deterministic formulas (no shared RNG between threads).
#include "catch_torch.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include "dist/gradient_reducer.h"
#include "dist/launcher.h"
#include "dist/process_group.h"
#include "test_support.h"
#include "util/error.h"

using namespace std::chrono_literals;
using nmt::dist::Communicator;
using nmt::dist::CommunicatorOptions;
using nmt::dist::GradientReducer;
using nmt::dist::GradientReducerOptions;

namespace {

std::shared_ptr<Communicator> connect(int port, int rank, std::chrono::milliseconds timeout = 10s) {
  CommunicatorOptions o;
  o.master_port = port;
  o.rank = rank;
  o.world_size = 2;
  o.timeout = timeout;
  return std::make_shared<Communicator>(o);
}

/// Runs body(rank) in one thread per rank; returns each rank's error message ("" if none).
std::vector<std::string> run_ranks(int world, const std::function<void(int)>& body) {
  std::vector<std::future<void>> done;
  for (int r = 0; r < world; ++r) {
    auto task = std::make_shared<std::packaged_task<void()>>([body, r] { body(r); });
    done.push_back(task->get_future());
    std::thread([task] { (*task)(); }).detach();
  }
  std::vector<std::string> errors(world);
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (int r = 0; r < world; ++r) {
    if (done[r].wait_until(deadline) != std::future_status::ready) FAIL("rank " << r << " hangs");
    try {
      done[r].get();
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  }
  return errors;
}

/// Parameters in registration order: W1 [8,4], b1 [8], U [5] (only rank 1 uses it), W2 [3,8],
/// b2 [3].
std::vector<at::Tensor> make_params() {
  auto leaf = [](at::Tensor t) { return t.detach().clone().set_requires_grad(true); };
  return {leaf(at::sin(at::arange(32, at::kFloat)).view({8, 4}) * 0.5),
          leaf(at::cos(at::arange(8, at::kFloat)) * 0.1),
          leaf(at::arange(5, at::kFloat) * 0.3),
          leaf(at::cos(at::arange(24, at::kFloat) * 0.7).view({3, 8}) * 0.4),
          leaf(at::sin(at::arange(3, at::kFloat)) * 0.2)};
}

/// Inputs of `rows` rows for rank r, micro-batch m.
at::Tensor inputs(int r, int m, int64_t rows = 6) {
  return at::cos(at::arange(rows * 4, at::kFloat) * (0.3 + 0.2 * r + 0.05 * m)).view({rows, 4});
}

/// A sum over rows (like the trainer's token-summed loss); rank 1 also uses U.
at::Tensor loss(const std::vector<at::Tensor>& p, const at::Tensor& x, int r) {
  at::Tensor h = at::tanh(at::linear(x, p[0], p[1]));
  at::Tensor out = at::linear(h, p[3], p[4]);
  at::Tensor l = (out * out).sum();
  if (r == 1) l = l + (p[2] * p[2]).sum();
  return l;
}

std::vector<at::Tensor> grads(const std::vector<at::Tensor>& p) {
  std::vector<at::Tensor> g;
  for (const auto& t : p) g.push_back(t.grad().defined() ? t.grad().clone() : at::Tensor());
  return g;
}

/// Sum over both ranks of the local gradients of `rows`-row inputs, computed without a reducer.
std::vector<at::Tensor> expected_sum(int64_t rows = 6) {
  std::vector<at::Tensor> sum;
  for (int r = 0; r < 2; ++r) {
    auto p = make_params();
    loss(p, inputs(r, 0, rows), r).backward();
    for (size_t i = 0; i < p.size(); ++i) {
      at::Tensor g = p[i].grad().defined() ? p[i].grad() : at::zeros_like(p[i]);
      if (r == 0) sum.push_back(g.clone()); else sum[i] += g;
    }
  }
  return sum;
}

void clear_grads(std::vector<at::Tensor>& p) {
  for (auto& t : p) t.mutable_grad() = at::Tensor();  // what optimizer zero_grad() does
}

size_t position(const std::vector<std::string>& events, const std::string& event) {
  return std::find(events.begin(), events.end(), event) - events.begin();
}

GradientReducerOptions small_buckets(bool overlap) {
  GradientReducerOptions o;
  o.bucket_mb = 100.0 / (1024 * 1024);  // 100 bytes: several buckets for this tiny net
  o.overlap = overlap;
  return o;
}

}  // namespace

TEST_CASE("buckets follow reverse registration order", "[dist][gloo]") {
  auto errors = run_ranks(1, [&](int) {
    CommunicatorOptions o;
    o.master_port = nmt::dist::find_free_port();
    auto comm = std::make_shared<Communicator>(o);
    auto p = make_params();
    GradientReducer reducer(p, comm, small_buckets(true));
    // b2 (12 B) + W2 (96 B) > 100 B: b2 alone; W2; U (20 B) + b1 (32 B); W1 (128 B) alone.
    NMT_RANK_CHECK(reducer.bucket_params() ==
                   std::vector<std::vector<size_t>>{{4}, {3}, {2, 1}, {0}});
    GradientReducer one(p, comm, GradientReducerOptions{});
    NMT_RANK_CHECK(one.num_buckets() == 1);
  });
  CHECK(errors[0] == "");
}

TEST_CASE("reduced gradients are the sum of both ranks' local gradients, overlap launches "
          "during backward and matches after-backward mode exactly", "[dist][gloo]") {
  const auto expected = expected_sum();
  const int port = nmt::dist::find_free_port();
  std::vector<std::vector<at::Tensor>> overlapped(2), after(2);
  std::vector<std::vector<std::string>> overlap_events(2), after_events(2);
  auto errors = run_ranks(2, [&](int r) {
    auto comm = connect(port, r);
    for (bool overlap : {true, false}) {
      auto p = make_params();
      GradientReducer reducer(p, comm, small_buckets(overlap));
      for (int update = 0; update < 2; ++update) {  // second update reuses the buffers
        clear_grads(p);
        reducer.clear_events();
        loss(p, inputs(r, 0), r).backward();
        reducer.finalize();
      }
      (overlap ? overlapped : after)[r] = grads(p);
      (overlap ? overlap_events : after_events)[r] = reducer.events();
    }
  });
  REQUIRE(errors == std::vector<std::string>{"", ""});
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    for (size_t i = 0; i < expected.size(); ++i) {
      INFO("parameter " << i);
      REQUIRE(overlapped[r][i].defined());
      CHECK(at::allclose(overlapped[r][i], expected[i], 1e-5, 1e-6));
      CHECK(at::equal(overlapped[r][i], after[r][i]));
      CHECK(at::equal(overlapped[r][i], overlapped[1 - r][i]));
    }
    const auto& ev = overlap_events[r];
    INFO(::Catch::Detail::stringify(ev));
    REQUIRE(position(ev, "backward end") < ev.size());
    CHECK(position(ev, "launch bucket 0") < position(ev, "backward end"));
    CHECK(position(ev, "backward end") < position(ev, "finalize"));
    CHECK(position(ev, "launch bucket 3") < ev.size());
    const auto& ae = after_events[r];
    INFO(::Catch::Detail::stringify(ae));
    CHECK(position(ae, "finalize") < position(ae, "launch bucket 0"));
    CHECK(position(ae, "backward end") < position(ae, "launch bucket 0"));
  }
  // Rank 0 never uses U: its bucket (2) waits for backward end there, bucket 0 does not.
  CHECK(position(overlap_events[0], "launch bucket 2") >
        position(overlap_events[0], "backward end"));
  CHECK(position(overlap_events[1], "launch bucket 2") <
        position(overlap_events[1], "backward end"));
}

TEST_CASE("after zero_grad the gradients live in the buckets and are summed where they are, "
          "bit for bit as separate gradients are",
          "[dist][gloo]") {
  const int port = nmt::dist::find_free_port();
  std::vector<std::vector<at::Tensor>> in_buckets(2), separate(2);
  std::vector<std::vector<bool>> held(2);
  auto errors = run_ranks(2, [&](int r) {
    auto comm = connect(port, r);
    auto p = make_params();
    GradientReducer reducer(p, comm, small_buckets(true));
    held[r].push_back(reducer.holds_gradients());  // nothing allocated yet: false
    for (int update = 0; update < 2; ++update) {
      reducer.zero_grad();
      held[r].push_back(reducer.holds_gradients());  // true
      loss(p, inputs(r, 0), r).backward();
      reducer.finalize();
      held[r].push_back(reducer.holds_gradients());  // true: backward added in place
    }
    in_buckets[r] = grads(p);
    // Gradients set to none (what ParameterOptimizer::zero_grad does): backward makes tensors
    // of its own, which are copied into the buckets and the sums back.
    auto q = make_params();
    GradientReducer other(q, comm, small_buckets(true));
    clear_grads(q);
    loss(q, inputs(r, 0), r).backward();
    held[r].push_back(other.holds_gradients());  // false
    other.finalize();
    separate[r] = grads(q);
  });
  REQUIRE(errors == std::vector<std::string>{"", ""});
  const auto expected = expected_sum();
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(held[r] == std::vector<bool>{false, true, true, true, true, false});
    for (size_t i = 0; i < expected.size(); ++i) {
      INFO("parameter " << i);
      CHECK(at::allclose(in_buckets[r][i], expected[i], 1e-5, 1e-6));
      CHECK(at::equal(in_buckets[r][i], separate[r][i]));
    }
  }
}

TEST_CASE("set_sync(false) accumulates locally, two micro-batches equal one big batch",
          "[dist][gloo]") {
  const int port = nmt::dist::find_free_port();
  std::vector<std::vector<at::Tensor>> accumulated(2), big(2);
  std::vector<std::vector<std::string>> events(2);
  auto errors = run_ranks(2, [&](int r) {
    auto comm = connect(port, r);
    auto p = make_params();
    GradientReducer reducer(p, comm, small_buckets(true));
    clear_grads(p);
    reducer.set_sync(false);
    // Micro-batch rows 0..5 and 6..11 of a 12-row batch; U's term counted once per batch.
    const at::Tensor x = inputs(r, 0, 12);
    loss(p, x.narrow(0, 0, 6), r).backward();
    NMT_RANK_CHECK(reducer.events().empty());  // no communication on an inner micro-batch
    reducer.set_sync(true);
    loss(p, x.narrow(0, 6, 6), r).backward();
    reducer.finalize();
    accumulated[r] = grads(p);
    events[r] = reducer.events();

    clear_grads(p);
    reducer.clear_events();
    at::Tensor l = loss(p, x, r);
    if (r == 1) l = l + (p[2] * p[2]).sum();  // the 2-micro-batch run counted U twice
    l.backward();
    reducer.finalize();
    big[r] = grads(p);
  });
  REQUIRE(errors == std::vector<std::string>{"", ""});
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << " events " << ::Catch::Detail::stringify(events[r]));
    CHECK(std::count(events[r].begin(), events[r].end(), "launch bucket 0") == 1);
    for (size_t i = 0; i < big[r].size(); ++i) {
      INFO("parameter " << i);
      CHECK(at::allclose(accumulated[r][i], big[r][i], 1e-5, 1e-6));
    }
  }
  // And it is not trivially equal: rank 0 alone would give different gradients.
  CHECK_FALSE(at::allclose(big[0][0], at::zeros_like(big[0][0])));
}

TEST_CASE("two synced backwards before finalize are reported, not silently mis-summed",
          "[dist][gloo]") {
  const int port = nmt::dist::find_free_port();
  auto errors = run_ranks(2, [&](int r) {
    auto comm = connect(port, r);
    auto p = make_params();
    GradientReducer reducer(p, comm, small_buckets(true));
    loss(p, inputs(r, 0), r).backward();
    loss(p, inputs(r, 1), r).backward();
    reducer.finalize();
  });
  for (int r = 0; r < 2; ++r) {
    INFO(errors[r]);
    CHECK(errors[r].find("rank " + std::to_string(r) + ": gradient reducer") != std::string::npos);
    CHECK(errors[r].find("set_sync(false)") != std::string::npos);
  }
}

TEST_CASE("a peer that leaves makes finalize fail with DistError within the timeout",
          "[dist][gloo]") {
  const int port = nmt::dist::find_free_port();
  std::chrono::steady_clock::duration waited{};
  auto errors = run_ranks(2, [&](int r) {
    auto comm = connect(port, r, 3s);
    auto p = make_params();
    GradientReducer reducer(p, comm, small_buckets(true));
    comm->barrier();
    if (r == 1) {
      std::this_thread::sleep_for(5s);  // alive but never reduces
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    try {
      loss(p, inputs(r, 0), r).backward();
      reducer.finalize();
    } catch (...) {
      waited = std::chrono::steady_clock::now() - t0;
      throw;
    }
  });
  INFO(errors[0]);
  CHECK(errors[0].find("rank 0: all_reduce_sum") != std::string::npos);
  CHECK(errors[0].find("gradient bucket") != std::string::npos);
  CHECK(errors[1] == "");
  CHECK(waited < 7s);
}
