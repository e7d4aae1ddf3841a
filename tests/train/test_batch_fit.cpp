#include <catch2/catch.hpp>

#include <cmath>
#include <optional>

#include "train/batch_fit.h"
#include "util/error.h"

using nmt::train::BatchFitOptions;
using nmt::train::fit_batch;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

/// A step whose peak is base + per_sentence x sentences, and that runs out of memory above
/// `device` bytes (as a GPU would, before the limit is reached or after).
struct LinearStep {
  int64_t base, per_sentence, device;
  int calls = 0;
  std::optional<int64_t> operator()(int64_t sentences) {
    ++calls;
    const int64_t peak = base + per_sentence * sentences;
    if (peak > device) return std::nullopt;
    return peak;
  }
};

}  // namespace

TEST_CASE("batch fit finds the largest count under the limit within its precision", "[batch_fit]") {
  LinearStep step{900 * kMiB, 3 * kMiB, 100000 * kMiB};
  BatchFitOptions options;
  options.limit_bytes = 2000 * kMiB;  // (2000 - 900) / 3 = 366.7: 366 fit
  options.max_sentences = 10000;
  const auto fit = fit_batch(std::ref(step), options);
  CHECK(fit.sentences <= 366);
  CHECK(fit.sentences >= 366 * (1 - options.precision) - 1);
  CHECK(fit.peak_bytes <= options.limit_bytes);
  CHECK(fit.peak_bytes == step.base + step.per_sentence * fit.sentences);
  CHECK(static_cast<int>(fit.probes.size()) <= options.max_probes);
  CHECK(fit.probes.front().sentences == 1);
}

TEST_CASE("batch fit stops at the cap when everything fits", "[batch_fit]") {
  LinearStep step{kMiB, kMiB, 100000 * kMiB};
  BatchFitOptions options;
  options.limit_bytes = 1000 * kMiB;
  options.max_sentences = 40;
  const auto fit = fit_batch(std::ref(step), options);
  CHECK(fit.sentences == 40);
  CHECK(fit.probes.size() <= 3);
}

TEST_CASE("batch fit treats running out of memory as too large", "[batch_fit]") {
  // The device is smaller than the limit claims: probes above 500 MiB fail outright.
  LinearStep step{100 * kMiB, 2 * kMiB, 500 * kMiB};
  BatchFitOptions options;
  options.limit_bytes = 4000 * kMiB;
  options.max_sentences = 100000;
  options.max_probes = 20;
  const auto fit = fit_batch(std::ref(step), options);
  CHECK(fit.sentences <= 200);
  CHECK(fit.sentences >= 190);
  for (const auto& probe : fit.probes)
    if (probe.sentences > 200) CHECK_FALSE(probe.peak_bytes.has_value());
}

TEST_CASE("batch fit follows a curve that is not linear", "[batch_fit]") {
  // Attention makes the peak grow faster than linearly in some shapes: the bracket still holds.
  auto step = [](int64_t n) -> std::optional<int64_t> {
    return static_cast<int64_t>(50 * kMiB + 0.01 * kMiB * std::pow(double(n), 1.5));
  };
  BatchFitOptions options;
  options.limit_bytes = 1050 * kMiB;  // n^1.5 = 100000: n = 2154
  options.max_sentences = 1 << 20;
  options.max_probes = 12;
  const auto fit = fit_batch(step, options);
  CHECK(fit.peak_bytes <= options.limit_bytes);
  CHECK(fit.sentences >= 2000);
  CHECK(fit.sentences <= 2154);
}

TEST_CASE("batch fit names the sizes when one sentence does not fit", "[batch_fit]") {
  LinearStep step{3000 * kMiB, kMiB, 100000 * kMiB};
  BatchFitOptions options;
  options.limit_bytes = 2000 * kMiB;
  options.max_sentences = 100;
  CHECK_THROWS_WITH(fit_batch(std::ref(step), options),
                    Catch::Contains("3001 MiB") && Catch::Contains("2000 MiB"));
}
