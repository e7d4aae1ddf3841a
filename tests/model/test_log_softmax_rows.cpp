// The in-place log-softmax of decoding steps against at::log_softmax, for every vector width the
// kernel has (4, 8 and 16 lanes, each run here whatever the processor), row lengths that are and
// are not multiples of them, masked (-inf) entries, and the rows at::log_softmax makes NaN.
#include <catch2/catch.hpp>

#include <limits>

#include <ATen/ATen.h>

#include "model/log_softmax_rows.h"

using nmt::model::log_softmax_rows_;
using nmt::model::VectorLanes;

TEST_CASE("log_softmax_rows_ equals at::log_softmax in place, with masked entries",
          "[model][log_softmax_rows]") {
  const auto lanes =
      GENERATE(VectorLanes::automatic, VectorLanes::four, VectorLanes::eight, VectorLanes::sixteen);
  INFO("lanes " << static_cast<int>(lanes));
  at::manual_seed(3);
  for (const int64_t vocab : {1, 3, 8, 17, 100, 8000}) {
    INFO("vocab " << vocab);
    at::Tensor logits = at::randn({5, vocab}) * 6.0;
    // Masked entries, as constraints and padding make them; each row keeps its first.
    logits.masked_fill_((at::rand({5, vocab}) < 0.2).index_fill_(1, at::zeros({1}, at::kLong), 0),
                        -std::numeric_limits<float>::infinity());
    const at::Tensor expected = logits.log_softmax(-1);
    at::Tensor actual = logits.clone();
    const void* storage = actual.data_ptr();
    log_softmax_rows_(actual, lanes);
    CHECK(actual.data_ptr() == storage);
    CHECK(at::allclose(actual, expected, 1e-5, 1e-5));
    CHECK(at::equal(actual.isinf(), expected.isinf()));
  }
}

TEST_CASE("log_softmax_rows_ makes NaN of what at::log_softmax makes NaN",
          "[model][log_softmax_rows]") {
  const auto lanes = GENERATE(VectorLanes::four, VectorLanes::eight, VectorLanes::sixteen);
  INFO("lanes " << static_cast<int>(lanes));
  const float inf = std::numeric_limits<float>::infinity();
  at::Tensor logits = at::randn({4, 37});
  logits[0].fill_(-inf);                                    // nothing but -inf
  logits[1][20] = std::numeric_limits<float>::quiet_NaN();  // a NaN
  logits[2][3] = inf;                                       // +inf
  const at::Tensor expected = logits.log_softmax(-1);
  REQUIRE(expected.slice(0, 0, 3).isnan().all().item<bool>());
  log_softmax_rows_(logits, lanes);
  CHECK(logits.slice(0, 0, 3).isnan().all().item<bool>());
  CHECK(at::allclose(logits[3], expected[3], 1e-5, 1e-5));
}

TEST_CASE("log_softmax_rows_ on a non-contiguous tensor: at::log_softmax's result, in place",
          "[model][log_softmax_rows]") {
  at::Tensor base = at::randn({30, 6});
  at::Tensor columns = base.t();  // [6, 30], not contiguous
  const at::Tensor expected = columns.log_softmax(-1);
  log_softmax_rows_(columns);
  CHECK(at::allclose(base.t(), expected));
  at::Tensor flat = at::randn({7});
  CHECK_THROWS_WITH(log_softmax_rows_(flat), Catch::Contains("[rows, V]"));
}
