#include <catch2/catch.hpp>

#include "config/sampling_spec.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::config::parse_sampling_spec;

namespace {

std::string spec_error(const std::string& spec) {
  try {
    parse_sampling_spec(spec);
  } catch (const nmt::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a sampling spec takes topk:K, temperature:T and both", "[config][sampling]") {
  CHECK(parse_sampling_spec("topk:10").top_k == 10);
  CHECK(parse_sampling_spec("topk:10").temperature == 1.0);
  CHECK(parse_sampling_spec("temperature:0.7").temperature == 0.7);
  CHECK(parse_sampling_spec("temperature:0.7").top_k == 0);
  const auto both = parse_sampling_spec("temperature:2,topk:5");
  CHECK(both.top_k == 5);
  CHECK(both.temperature == 2.0);
}

TEST_CASE("a bad sampling spec is one error naming --sampling", "[config][sampling]") {
  CHECK_THAT(spec_error("topk:0"), Contains("--sampling topk:0: topk:K expects an integer K >= 1"));
  CHECK_THAT(spec_error("topk:2.5"), Contains("--sampling topk:2.5: topk:K expects"));
  CHECK_THAT(spec_error("temperature:-1"),
             Contains("--sampling temperature:-1: temperature:T expects a number T in "
                      "[0.001, 1000] (below it, use topk:1 for greedy search), found '-1'"));
  CHECK_THAT(spec_error("temperature:inf"), Contains("temperature:T expects"));
  // Below about 1e-30 the tempered log-probabilities were all -inf: NaN, and always the last
  // token. The range refuses such values instead.
  CHECK_THAT(spec_error("temperature:1e-31"), Contains("in [0.001, 1000]"));
  CHECK_THAT(spec_error("temperature:0.0009"), Contains("in [0.001, 1000]"));
  CHECK_THAT(spec_error("temperature:1001"), Contains("in [0.001, 1000]"));
  CHECK(parse_sampling_spec("temperature:0.001").temperature == 0.001);
  CHECK(parse_sampling_spec("temperature:1000").temperature == 1000.0);
  CHECK_THAT(spec_error("temperature:"), Contains("found ''"));
  CHECK_THAT(spec_error("foo:3"), Contains("--sampling foo:3: unknown sampling 'foo:3'; expected "
                                           "topk:K, temperature:T or topk:K,temperature:T"));
  CHECK_THAT(spec_error("topk:3,topk:4"), Contains("topk given twice"));
  CHECK_THAT(spec_error("topk:3,"), Contains("trailing comma"));
  CHECK_THAT(spec_error(""), Contains("--sampling: empty value"));
}
