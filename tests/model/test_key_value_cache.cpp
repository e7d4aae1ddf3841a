// The decoder's key/value cache: what it holds after appends, growth past its first capacity
// and reorders equals the concatenation and gathering it replaces, exactly.
#include <catch2/catch.hpp>

#include <vector>

#include <ATen/ATen.h>

#include "model/key_value_cache.h"

using nmt::model::KeyValue;
using nmt::model::KeyValueCache;

namespace {

/// One position of random keys and values [rows, 2 heads, 1, 3].
KeyValue position(int64_t rows) { return {at::randn({rows, 2, 1, 3}), at::randn({rows, 2, 1, 3})}; }

bool same(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && at::equal(a, b);
}

}  // namespace

TEST_CASE("key/value cache: appends and reorders equal cat and index_select", "[model][kv_cache]") {
  at::manual_seed(3);
  KeyValueCache cache;
  CHECK(cache.length() == 0);
  CHECK(cache.rows() == 0);
  CHECK_FALSE(cache.view().key.defined());
  cache.reorder(at::tensor({0, 0, 1}, at::kLong));  // empty: nothing to keep

  // 150 positions: past the first capacity (16) four times, with a reorder every 7th step that
  // repeats, drops and permutes rows, and one that shrinks the batch.
  int64_t rows = 4;
  KeyValue expected;
  for (int64_t t = 0; t < 150; ++t) {
    INFO("position " << t);
    const KeyValue next = position(rows);
    cache.append(next);
    expected.key = expected.key.defined() ? at::cat({expected.key, next.key}, 2) : next.key;
    expected.value =
        expected.value.defined() ? at::cat({expected.value, next.value}, 2) : next.value;
    REQUIRE(cache.length() == t + 1);
    REQUIRE(cache.rows() == rows);
    REQUIRE(same(cache.view().key, expected.key));
    REQUIRE(same(cache.view().value, expected.value));
    if (t % 7 == 6) {
      const at::Tensor order = t == 90     ? at::tensor({3, 1}, at::kLong)
                               : rows == 4 ? at::tensor({2, 2, 0, 3}, at::kLong)
                                           : at::tensor({1, 0}, at::kLong);
      cache.reorder(order);
      expected = {expected.key.index_select(0, order), expected.value.index_select(0, order)};
      rows = order.size(0);
      REQUIRE(same(cache.view().key, expected.key));
      REQUIRE(same(cache.view().value, expected.value));
    }
  }
  CHECK(rows == 2);
}

TEST_CASE("key/value cache: a reorder to more rows than it held", "[model][kv_cache]") {
  // Beam search expands rows when sentences start; a cache that already holds positions
  // gathers into buffers of the new row count.
  at::manual_seed(4);
  KeyValueCache cache;
  const KeyValue first = position(2);
  cache.append(first);
  const at::Tensor order = at::tensor({0, 0, 0, 1, 1, 1}, at::kLong);
  cache.reorder(order);
  CHECK(same(cache.view().key, first.key.index_select(0, order)));
  const KeyValue second = position(6);
  cache.append(second);
  CHECK(same(cache.view().value, at::cat({first.value.index_select(0, order), second.value}, 2)));
}

TEST_CASE("key/value cache: refuses a position of another shape", "[model][kv_cache]") {
  KeyValueCache cache;
  cache.append(position(2));
  CHECK_THROWS_WITH(cache.append(position(3)), Catch::Contains("appended to 2 rows"));
  CHECK_THROWS_WITH(cache.append({at::zeros({2, 2, 2, 3}), at::zeros({2, 2, 2, 3})}),
                    Catch::Contains("expected one position"));
}

TEST_CASE("key/value cache: values written carry no gradient", "[model][kv_cache]") {
  KeyValueCache cache;
  const at::Tensor key = at::randn({1, 2, 1, 3}).requires_grad_();
  cache.append({key * 2, key * 3});
  cache.reorder(at::tensor({0, 0}, at::kLong));  // with autograd on, as a caller may have it
  CHECK_FALSE(cache.view().key.requires_grad());
  CHECK(at::equal(cache.view().key.select(0, 1), (key * 2).detach().select(0, 0)));
}
