// The few-query attention kernel of decoding steps against its definition, softmax(q k^T) v
// with matrix products, over the shapes decoding gives it: one query or a few, head widths
// and key counts that are and are not multiples of each vector width the kernel has (4, 8 and 16
// lanes, each run here whatever the processor: natively where it has the instruction set),
// strided queries (heads of a fused projection), keys and values narrowed from cache buffers, and
// masks in every broadcast.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include <ATen/ATen.h>

#include "model/few_query_attention.h"

using nmt::model::attend_few_queries;
using nmt::model::VectorLanes;

namespace {

/// The definition: [B, heads, Q, d] -> [B, Q, heads * d].
at::Tensor reference(const at::Tensor& q, const at::Tensor& key, const at::Tensor& value,
                     const at::Tensor& mask, double scale) {
  at::Tensor scores = at::matmul(q.to(at::kDouble), key.to(at::kDouble).transpose(-2, -1)) * scale;
  if (mask.defined())
    scores = scores.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
  const at::Tensor context = at::matmul(scores.softmax(-1), value.to(at::kDouble));
  return context.transpose(1, 2).reshape({q.size(0), q.size(2), -1}).to(at::kFloat);
}

/// A random padding mask [B, 1, 1, S] with at least one attendable key a row.
at::Tensor padding_mask(int64_t batch, int64_t keys) {
  at::Tensor mask = at::rand({batch, 1, 1, keys}) > 0.3;
  mask.select(3, 0).fill_(true);
  return mask;
}

}  // namespace

TEST_CASE("few-query attention: equals softmax(q k^T) v for decoding's shapes and strides",
          "[model][few_query_attention]") {
  at::manual_seed(11);
  const auto lanes =
      GENERATE(VectorLanes::automatic, VectorLanes::four, VectorLanes::eight, VectorLanes::sixteen);
  INFO("lanes " << static_cast<int>(lanes) << " (native here: " << nmt::model::native_vector_lanes()
                << ")");
  for (const int64_t d : {1, 15, 16, 48, 64, 70}) {
    for (const int64_t queries : {1, 4, 16}) {
      for (const int64_t keys : {1, 7, 16, 33}) {
        INFO("d_head " << d << ", queries " << queries << ", keys " << keys);
        const int64_t batch = 3, heads = 2;
        const double scale = 1.0 / std::sqrt(static_cast<double>(d));
        // Queries as a fused projection's heads: a slice of [B, Q, 3 * heads * d], split.
        const at::Tensor fused = at::randn({batch, queries, 3 * heads * d});
        const at::Tensor q =
            fused.narrow(2, 0, heads * d).view({batch, queries, heads, d}).transpose(1, 2);
        // Keys and values as a cache's view: the first rows and positions of bigger buffers.
        const at::Tensor key_buffer = at::randn({batch + 2, heads, keys + 5, d});
        const at::Tensor value_buffer = at::randn({batch + 2, heads, keys + 5, d});
        const at::Tensor key = key_buffer.narrow(0, 0, batch).narrow(2, 0, keys);
        const at::Tensor value = value_buffer.narrow(0, 0, batch).narrow(2, 0, keys);
        REQUIRE_FALSE(q.is_contiguous());
        REQUIRE_FALSE(key.is_contiguous());

        const at::Tensor unmasked = attend_few_queries(q, key, value, {}, scale, lanes);
        CHECK(unmasked.sizes() == at::IntArrayRef{batch, queries, heads * d});
        CHECK(unmasked.is_contiguous());
        CHECK(at::allclose(unmasked, reference(q, key, value, {}, scale), 1e-5, 1e-5));

        const at::Tensor padding = padding_mask(batch, keys);
        CHECK(at::allclose(attend_few_queries(q, key, value, padding, scale, lanes),
                           reference(q, key, value, padding, scale), 1e-5, 1e-5));
        // A full mask [B, heads, Q, S], each query its own keys (the first always allowed).
        at::Tensor full = at::rand({batch, heads, queries, keys}) > 0.5;
        full.select(3, 0).fill_(true);
        CHECK(at::allclose(attend_few_queries(q, key, value, full, scale, lanes),
                           reference(q, key, value, full, scale), 1e-5, 1e-5));
      }
    }
  }
}

TEST_CASE("few-query attention: the automatic width is the processor's widest",
          "[model][few_query_attention]") {
  const int native = nmt::model::native_vector_lanes();
  CHECK((native == 4 || native == 8 || native == 16));
  at::manual_seed(5);
  const at::Tensor q = at::randn({2, 3, 2, 40});
  const at::Tensor key = at::randn({2, 3, 21, 40});
  const at::Tensor value = at::randn({2, 3, 21, 40});
  // Bit for bit: the same code runs.
  CHECK(at::equal(attend_few_queries(q, key, value, {}, 0.3),
                  attend_few_queries(q, key, value, {}, 0.3, static_cast<VectorLanes>(native))));
}

TEST_CASE("few-query attention: masked keys weigh nothing, even huge ones, and none gives NaN",
          "[model][few_query_attention]") {
  const auto lanes = GENERATE(VectorLanes::four, VectorLanes::eight, VectorLanes::sixteen);
  INFO("lanes " << static_cast<int>(lanes));
  const at::Tensor q = at::ones({1, 1, 2, 4});
  at::Tensor key = at::zeros({1, 1, 3, 4});
  at::Tensor value = at::zeros({1, 1, 3, 4});
  key[0][0][2].fill_(1e30);  // would win every softmax
  value[0][0][0].fill_(1.0);
  value[0][0][1].fill_(3.0);
  value[0][0][2].fill_(std::numeric_limits<float>::quiet_NaN());
  at::Tensor mask = at::tensor({1, 1, 0}).gt(0).view({1, 1, 1, 3});
  const at::Tensor out = attend_few_queries(q, key, value, mask, 0.5, lanes);
  CHECK(at::allclose(out, at::full({1, 2, 4}, 2.0f)));  // equal scores: the mean of 1 and 3

  mask = at::tensor({1, 1, 0, 0, 0, 0}).gt(0).view({1, 1, 2, 3});
  const at::Tensor none = attend_few_queries(q, key, value, mask, 0.5, lanes);
  CHECK(at::allclose(none.select(1, 0), at::full({1, 4}, 2.0f)));
  CHECK(none.select(1, 1).isnan().all().item<bool>());
}

TEST_CASE("few-query attention: refuses what it does not compute", "[model][few_query_attention]") {
  const at::Tensor q = at::randn({1, 2, 1, 8});
  const at::Tensor kv = at::randn({1, 2, 5, 8});
  CHECK_THROWS_WITH(attend_few_queries(q.to(at::kDouble), kv, kv, {}, 1.0),
                    Catch::Contains("float32"));
  CHECK_THROWS_WITH(
      attend_few_queries(q, at::randn({1, 2, 5, 4}), at::randn({1, 2, 5, 4}), {}, 1.0),
      Catch::Contains("do not match"));
  CHECK_THROWS_WITH(attend_few_queries(q, kv, kv, at::ones({1, 1, 1, 5}), 1.0),
                    Catch::Contains("boolean"));
}
