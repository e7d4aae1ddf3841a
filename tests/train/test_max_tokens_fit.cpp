// data.max_tokens: auto on CPU: a tiny model on a small real corpus, memory measured by the
// caching host allocator against data.auto_memory_mb.
#include "catch_torch.h"

#include <algorithm>
#include <string>

#include "data/data_fixture.h"
#include "dist/host_allocator.h"
#include "train/max_tokens_fit.h"
#include "train/run_setup.h"
#include "util/error.h"

using nmt::train::MaxTokensChoice;
using nmt::train::RunSetup;
using nmt::train::choose_max_tokens;

namespace {

/// One CPU rank of a 1+1-layer model of width 16 on the small corpus, max_tokens auto.
RunSetup tiny_run() {
  RunSetup s;
  s.model.encoder_layers = 1;
  s.model.decoder_layers = 1;
  s.model.d_model = 16;
  s.model.heads = 2;
  s.model.ffn_dim = 32;
  s.model.max_positions = 128;
  s.data = nmt::test::small_corpus().options;
  s.data.max_tokens.reset();
  s.data.auto_max_tokens_limit = 4096;  // bounds the search: seconds, not minutes
  return s;
}

/// The caching host allocator, counting every block: the tiny model's tensors are all below
/// its default 1 MiB threshold, which would leave the measured peak at 0.
void measure_every_allocation() {
  nmt::dist::HostAllocatorOptions options;
  options.min_cached_bytes = 0;
  nmt::dist::install_caching_host_allocator(options);
}

/// The longest training pair with EOS/BOS, as the fit measures it.
int64_t longest(const nmt::data::PreparedData& data) {
  int64_t length = 2;
  for (int64_t i = 0; i < data.train.size(); ++i)
    length = std::max({length, data.train.src_length(i) + 1, data.train.tgt_length(i) + 1});
  return length;
}

}  // namespace

TEST_CASE("max_tokens fit: a configured number is the budget, nothing is measured", "[train]") {
  RunSetup s = tiny_run();
  s.data.max_tokens = 1500;
  const MaxTokensChoice choice = choose_max_tokens(s.data.max_tokens, s,
                                                   nmt::test::small_corpus().prepared, 1);
  CHECK(choice.max_tokens == 1500);
  CHECK_FALSE(choice.fit.has_value());
  CHECK(nmt::train::describe_max_tokens(s.data) == "1500");
}

TEST_CASE("max_tokens fit: auto on CPU without auto_memory_mb falls back to the unmeasured "
          "budget and says why", "[train]") {
  const RunSetup s = tiny_run();
  const MaxTokensChoice choice = choose_max_tokens(s.data.max_tokens, s,
                                                   nmt::test::small_corpus().prepared, 1);
  REQUIRE(choice.fit.has_value());
  CHECK(choice.max_tokens == nmt::train::unmeasured_max_tokens(s.data));
  CHECK(choice.fit->max_tokens == choice.max_tokens);
  CHECK(choice.fit->probes.empty());
  CHECK(choice.fit->fallback.find("data.auto_memory_mb") != std::string::npos);
  CHECK(nmt::train::describe_max_tokens(s.data) == "auto (measured at start)");
}

TEST_CASE("max_tokens fit: auto measures the largest budget of longest sentences within the "
          "memory, and more memory fits more", "[train]") {
  measure_every_allocation();
  const nmt::data::PreparedData& data = nmt::test::small_corpus().prepared;
  RunSetup s = tiny_run();
  s.data.auto_memory_mb = 24;
  const MaxTokensChoice small = choose_max_tokens(s.data.max_tokens, s, data, 1);
  REQUIRE(small.fit.has_value());
  const nmt::train::MaxTokensFit& fit = *small.fit;
  INFO("fallback: " << fit.fallback);
  REQUIRE(fit.fallback.empty());
  CHECK(fit.length == longest(data));
  CHECK(fit.sentences >= 1);
  CHECK(small.max_tokens == fit.sentences * fit.length);
  CHECK(small.max_tokens < s.data.auto_max_tokens_limit);  // memory, not the limit, bounds it
  CHECK(fit.memory_mb == 24.0);
  CHECK(fit.limit_mb == Approx(24.0 * s.data.auto_memory_fraction));
  CHECK(fit.peak_mb > 0);
  CHECK(fit.peak_mb <= fit.limit_mb);
  CHECK_FALSE(fit.probes.empty());
  s.data.auto_memory_mb = 192;
  const MaxTokensChoice large = choose_max_tokens(s.data.max_tokens, s, data, 1);
  CHECK(large.max_tokens > small.max_tokens);
}

TEST_CASE("max_tokens fit: auto with memory for not even one sentence is a ConfigError naming "
          "the rank", "[train]") {
  measure_every_allocation();
  RunSetup s = tiny_run();
  s.data.auto_memory_mb = 1;
  s.data.auto_memory_fraction = 0.001;  // about 1 KiB
  CHECK_THROWS_AS(
      choose_max_tokens(s.data.max_tokens, s, nmt::test::small_corpus().prepared, 1),
      nmt::ConfigError);
  CHECK_THROWS_WITH(
      choose_max_tokens(s.data.max_tokens, s, nmt::test::small_corpus().prepared, 1),
      Catch::Matchers::Contains("data.max_tokens auto: rank 0:"));
}
