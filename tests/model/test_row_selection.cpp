// Keeping rows of a decoding state: the in-place moves equal index_select for every order, and
// they are taken (the tensor keeps its storage) only where few rows move.
#include <catch2/catch.hpp>

#include <vector>

#include <ATen/ATen.h>

#include "model/key_value_cache.h"
#include "model/row_selection.h"

using nmt::model::few_row_moves;
using nmt::model::KeyValue;
using nmt::model::KeyValueCache;
using nmt::model::select_rows;

namespace {

at::Tensor order_of(const std::vector<int64_t>& rows) { return at::tensor(rows, at::kLong); }

std::vector<int64_t> values(const at::Tensor& t) {
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

}  // namespace

TEST_CASE("row selection: the moves of an order that leaves most rows in place",
          "[model][row_selection]") {
  // Rows 2 and 5 of 8 ended; the last two kept rows take their places.
  auto moves = few_row_moves(order_of({0, 1, 7, 3, 4, 6}), 8);
  REQUIRE(moves.has_value());
  CHECK(values(moves->to) == std::vector<int64_t>{2, 5});
  CHECK(values(moves->from) == std::vector<int64_t>{7, 6});
  // Nothing moves: no copies at all.
  moves = few_row_moves(order_of({0, 1, 2}), 5);
  REQUIRE(moves.has_value());
  CHECK(moves->to.numel() == 0);
  // Where half or more move, or the order is longer than the rows (beams growing), a gather
  // is cheaper or needed.
  CHECK_FALSE(few_row_moves(order_of({1, 0, 2, 3}), 4).has_value());
  CHECK_FALSE(few_row_moves(order_of({0, 1, 2, 3, 3}), 4).has_value());
}

TEST_CASE("row selection: select_rows equals index_select, in place where few rows move",
          "[model][row_selection]") {
  at::manual_seed(2);
  const std::vector<std::vector<int64_t>> orders = {
      {0, 1, 9, 3, 4, 5, 6, 7, 8},     // one row ended, the last fills its place: in place
      {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},  // nothing ended
      {9, 8, 7, 6, 5, 4, 3, 2, 1, 0},  // all move: gathered
      {0, 0, 2, 3, 4, 5, 6, 7, 8, 1},  // a repeat and a row both read and written
      {3, 1}};                         // shrinks to two rows
  for (const auto& rows : orders) {
    const at::Tensor order = order_of(rows);
    INFO("order " << order);
    // A plain tensor, and a strided one (the first positions of wider buffers, as the caches).
    for (const bool strided : {false, true}) {
      const at::Tensor base = at::randn({10, 3, strided ? 7 : 4});
      at::Tensor t = strided ? base.narrow(2, 1, 4) : base.clone();
      const at::Tensor expected = t.index_select(0, order);
      const void* storage = t.data_ptr();
      const bool in_place = few_row_moves(order, t.size(0)).has_value();
      select_rows(t, order);
      CHECK(at::equal(t, expected));
      CHECK((t.data_ptr() == storage) == in_place);
    }
  }
  at::Tensor undefined;
  select_rows(undefined, order_of({0}));
  CHECK_FALSE(undefined.defined());
}

TEST_CASE("row selection: a cache reordered in place holds what index_select gives, and grows on",
          "[model][row_selection][kv_cache]") {
  at::manual_seed(4);
  KeyValueCache cache;
  KeyValue expected;
  int64_t rows = 12;
  for (int64_t t = 0; t < 40; ++t) {
    const KeyValue next{at::randn({rows, 2, 1, 3}), at::randn({rows, 2, 1, 3})};
    cache.append(next);
    expected.key = expected.key.defined() ? at::cat({expected.key, next.key}, 2) : next.key;
    expected.value =
        expected.value.defined() ? at::cat({expected.value, next.value}, 2) : next.value;
    if (t % 5 == 4 && rows > 2) {
      // Row 1 ends: the last row takes its place, the others stay.
      std::vector<int64_t> keep;
      for (int64_t r = 0; r < rows - 1; ++r) keep.push_back(r == 1 ? rows - 1 : r);
      const at::Tensor order = order_of(keep);
      REQUIRE(few_row_moves(order, rows).has_value());
      cache.reorder(order);
      expected = {expected.key.index_select(0, order), expected.value.index_select(0, order)};
      rows = order.size(0);
    }
    REQUIRE(cache.rows() == rows);
    REQUIRE(at::equal(cache.view().key, expected.key));
    REQUIRE(at::equal(cache.view().value, expected.value));
  }
  CHECK(rows == 4);
}

TEST_CASE("row selection: rows copied by their contiguous runs equal index_select",
          "[model][row_selection]") {
  using nmt::model::apply_row_moves;
  using nmt::model::gather_rows;
  at::manual_seed(6);
  const at::Tensor order = order_of({4, 0, 0, 5, 2});
  // Source layouts: plain, a cache's filled view (a run per head), a run per row of a wider
  // buffer, one whose inner dimensions are not contiguous and a broadcast one (both copied by
  // index_select), and other dtypes.
  const at::Tensor buffer = at::randn({6, 3, 9, 5});
  const std::vector<at::Tensor> sources = {at::randn({6, 3, 4}),
                                           buffer.narrow(2, 0, 4),
                                           buffer.select(1, 2).narrow(1, 0, 9),
                                           buffer.narrow(2, 0, 4).transpose(2, 3),
                                           at::randn({1, 3, 4}).expand({6, 3, 4}),
                                           at::randint(-100, 100, {6, 2, 3}, at::kLong),
                                           at::randn({6, 1, 1, 7}).gt(0)};
  for (const at::Tensor& src : sources) {
    INFO("source " << src.sizes() << " strides " << src.strides() << " " << src.scalar_type());
    const at::Tensor expected = src.index_select(0, order);
    // Into a plain tensor and into the first positions of a wider buffer.
    at::Tensor plain = at::empty_like(expected);
    gather_rows(plain, src, order);
    CHECK(at::equal(plain, expected));
    std::vector<int64_t> wide_sizes = expected.sizes().vec();
    wide_sizes.back() += 3;
    const at::Tensor wide = at::zeros(wide_sizes, expected.options());
    const at::Tensor view = wide.narrow(-1, 0, expected.size(-1));
    gather_rows(view, src, order);
    CHECK(at::equal(view, expected));
    CHECK(at::equal(wide.narrow(-1, expected.size(-1), 3), at::zeros_like(wide.narrow(-1, 0, 3))));
  }
  const at::Tensor src = at::randn({6, 3, 4});
  at::Tensor out = at::empty({2, 3, 4});
  CHECK_THROWS_WITH(gather_rows(out, src, order_of({1, 6})), Catch::Contains("out of range"));

  // Moves: rows that move come from rows that stay (one memcpy a run), and a row both read and
  // written (copied out first); each equals the order's index_select on a strided cache view.
  for (const std::vector<int64_t>& rows :
       {std::vector<int64_t>{0, 0, 2, 3, 4, 2}, std::vector<int64_t>{0, 5, 2, 3, 4, 1}}) {
    const at::Tensor t = at::randn({6, 3, 9, 5}).narrow(2, 0, 4);
    const at::Tensor expected = t.index_select(0, order_of(rows));
    const auto moves = few_row_moves(order_of(rows), 6);
    REQUIRE(moves.has_value());
    apply_row_moves(t, *moves);
    CHECK(at::equal(t, expected));
  }
}

TEST_CASE("row selection: a cache gathered when most rows move holds what index_select gives",
          "[model][row_selection][kv_cache]") {
  at::manual_seed(8);
  KeyValueCache cache;
  KeyValue expected;
  for (int64_t t = 0; t < 20; ++t) {
    const KeyValue next{at::randn({4, 2, 1, 3}), at::randn({4, 2, 1, 3})};
    cache.append(next);
    expected.key = expected.key.defined() ? at::cat({expected.key, next.key}, 2) : next.key;
    expected.value =
        expected.value.defined() ? at::cat({expected.value, next.value}, 2) : next.value;
    // Beams of one sentence: half the rows or more move (a gather).
    const at::Tensor order = order_of({0, 0, 1, t % 4});
    cache.reorder(order);
    expected = {expected.key.index_select(0, order), expected.value.index_select(0, order)};
    REQUIRE(at::equal(cache.view().key, expected.key));
    REQUIRE(at::equal(cache.view().value, expected.value));
  }
}
