#include "catch_torch.h"  // first: see the header

#include <string>

#include "train/benchmark.h"
#include "util/error.h"

using nmt::train::BenchmarkResult;

TEST_CASE("step-time summary: median, mean, extremes and numpy-style percentiles",
          "[train][benchmark]") {
  const auto t = nmt::train::summarize_step_times({0.5, 0.1, 0.4, 0.2, 0.3});
  CHECK(t.median == Approx(0.3));
  CHECK(t.mean == Approx(0.3));
  CHECK(t.min == Approx(0.1));
  CHECK(t.max == Approx(0.5));
  CHECK(t.p10 == Approx(0.14));  // numpy.percentile([...], 10)
  CHECK(t.p90 == Approx(0.46));
  CHECK(nmt::train::summarize_step_times({2.0}).p90 == 2.0);
  CHECK_THROWS_AS(nmt::train::summarize_step_times({}), nmt::Error);
}

TEST_CASE("the measured matmul peak is positive and says how it was measured",
          "[train][benchmark]") {
  std::string method;
  const double peak = nmt::train::measure_peak_tflops(c10::Device(c10::kCPU),
                                                      nmt::amp::AmpMode::kOff, 0.05, &method);
  CHECK(peak > 0);
  CHECK(peak < 1000);  // TFLOP/s: far above any CPU
  CHECK(method.find("2048x2048") != std::string::npos);
}

TEST_CASE("benchmark.json holds every figure, MFU from FLOPs and the peak", "[train][benchmark]") {
  BenchmarkResult r;
  r.steps = 4;
  r.seconds = 2.0;
  r.real_tokens = 1000;
  r.padded_tokens = 1200;
  r.flops_per_step = 0.5e12;
  r.peak_tflops = 4.0;
  r.peak_memory_mb = {10.0, 12.5};
  CHECK(r.tokens_per_s() == 500);
  CHECK(r.achieved_tflops() == 1.0);
  CHECK(r.mfu() == 0.25);
  const std::string json = nmt::train::benchmark_json(r);
  for (const char* key :
       {"\"tokens_per_s\": 500", "\"padded_tokens_per_s\": 600", "\"mfu\": 0.25",
        "\"peak_memory_mb\": [10, 12.5]", "\"step_time_s\": {\"median\"",
        "\"time_split_s\": {\"data_wait\"", "\"model_flops_per_step\": 500000000000"}) {
    INFO(json);
    CHECK(json.find(key) != std::string::npos);
  }
}
