#include "catch_torch.h"  // first: see the header

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "train/benchmark.h"
#include "train/hardware_peak.h"
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
  INFO(method);
  CHECK(std::regex_search(method, std::regex("^best of [0-9]+ Float [0-9]+x[0-9]+ matmuls on cpu")));
}

TEST_CASE("the matmul peak's size stops growing when one product takes an eighth of the budget",
          "[train][benchmark]") {
  // Chosen timings, not this machine's: which size a real CPU reaches depends on its speed
  // (an AMX CPU in CI ran a bf16 1024 product in under 6 ms and grew to 2048). The rule:
  // double from 256 while a product takes under seconds / 8, never past `largest`, and never
  // time a product at `largest` (a slow dtype's 2048 product took 77 s).
  std::vector<int64_t> timed;
  const auto cubic = [&](double seconds_at_256) {
    return [&timed, seconds_at_256](int64_t n) {
      timed.push_back(n);
      const double r = double(n) / 256.0;
      return seconds_at_256 * r * r * r;
    };
  };
  // 1 ms at 256, 8 ms at 512: with a 0.05 s budget (eighth: 6.25 ms) it stops at 512.
  CHECK(nmt::train::matmul_peak_size(cubic(0.001), 0.05, 2048) == 512);
  CHECK(timed == std::vector<int64_t>{256, 512});
  // A slow dtype stops at the first size.
  timed.clear();
  CHECK(nmt::train::matmul_peak_size(cubic(0.5), 0.05, 2048) == 256);
  CHECK(timed == std::vector<int64_t>{256});
  // A fast one reaches the largest size without timing a product there.
  timed.clear();
  CHECK(nmt::train::matmul_peak_size(cubic(1e-6), 0.05, 2048) == 2048);
  CHECK(timed == std::vector<int64_t>{256, 512, 1024});
  // Exactly an eighth stops, as the rule says "under".
  timed.clear();
  CHECK(nmt::train::matmul_peak_size([](int64_t) { return 0.05 / 8; }, 0.05, 2048) == 256);
}

TEST_CASE("the measured matmul peak's size is one the rule can reach, in whatever dtype",
          "[train][benchmark]") {
  for (auto mode : {nmt::amp::AmpMode::kOff, nmt::amp::AmpMode::kBf16}) {
    std::string method;
    nmt::train::measure_peak_tflops(c10::Device(c10::kCPU), mode, 0.05, &method);
    INFO(method);
    CHECK(std::regex_search(method, std::regex(" (256|512|1024|2048)x\\1 matmuls")));
  }
}

TEST_CASE("benchmark.json holds every figure: MFU against the hardware peak, the measured ceiling beside it",
          "[train][benchmark]") {
  BenchmarkResult r;
  r.steps = 4;
  r.seconds = 2.0;
  r.real_tokens = 1000;
  r.padded_tokens = 1200;
  r.flops_per_step = 0.5e12;
  r.kernel_flops_per_step = 0.6e12;
  r.hardware_peak_tflops = 4.0;
  r.hardware_peak_source = "datasheet: X";
  r.peak_tflops = 2.0;
  r.peak_memory_mb = {10.0, 12.5};
  r.separate_phase_pass = true;
  r.phase_steps = 2;
  r.phase_seconds = 1.25;
  r.phase_real_tokens = 500;
  CHECK(r.tokens_per_s() == 500);
  CHECK(r.phase_tokens_per_s() == 400);
  CHECK(r.achieved_tflops() == 1.0);
  CHECK(r.mfu() == 0.25);
  CHECK(r.matmul_ceiling_fraction() == 0.5);
  const std::string json = nmt::train::benchmark_json(r);
  for (const char* key :
       {"\"tokens_per_s\": 500", "\"padded_tokens_per_s\": 600", "\"mfu\": 0.25",
        "\"matmul_ceiling_fraction\": 0.5", "\"hardware_peak_tflops\": 4",
        "\"hardware_peak_source\": \"datasheet: X\"", "\"peak_memory_mb\": [10, 12.5]",
        "\"step_time_s\": {\"median\"", "\"time_split_s\": {\"data_wait\"",
        "\"model_flops_per_step\": 500000000000", "\"kernel_flops_per_step\": 600000000000",
        "\"phase_timing\": {\"pass\": \"separate\", \"device_synced\": true, \"steps\": 2, "
        "\"seconds\": 1.25, \"tokens_per_s\": 400}"}) {
    INFO(json);
    CHECK(json.find(key) != std::string::npos);
  }
  // An unknown hardware peak gives no MFU rather than one against another ceiling.
  r.hardware_peak_tflops = 0;
  CHECK(std::isnan(r.mfu()));
  const std::string unknown = nmt::train::benchmark_json(r);
  CHECK(unknown.find("\"mfu\": null") != std::string::npos);
  CHECK(unknown.find("\"hardware_peak_tflops\": null") != std::string::npos);
}

TEST_CASE("hardware peaks: GPU datasheets by name and precision, CPUs only with a known clock",
          "[train][benchmark]") {
  using nmt::amp::AmpMode;
  using nmt::train::cpu_peak;
  using nmt::train::gpu_peak;
  CHECK(gpu_peak("NVIDIA H200, 139.8 GiB, sm_90", AmpMode::kBf16).tflops == 989);
  CHECK(gpu_peak("NVIDIA H200", AmpMode::kOff).tflops == 67);
  CHECK(gpu_peak("NVIDIA H100 PCIe", AmpMode::kFp16).tflops == 756);
  CHECK(gpu_peak("NVIDIA A100-SXM4-80GB", AmpMode::kBf16).tflops == 312);
  CHECK(gpu_peak("NVIDIA V100-SXM2-16GB", AmpMode::kBf16).tflops == 0);  // no bf16 math
  CHECK_THAT(gpu_peak("Some GPU", AmpMode::kBf16).source, Catch::Matchers::Contains("unknown"));
  const std::string intel = "vendor_id\t: GenuineIntel\nflags\t\t: fpu avx2 fma avx512f\n";
  const std::string amd = "vendor_id\t: AuthenticAMD\nflags\t\t: fpu avx2 fma avx512f avx512_bf16\n";
  // 2 threads x 16 lanes x 2 FMA units x 2 x 3 GHz = 0.384 TFLOP/s.
  CHECK(cpu_peak(intel, 3000000, 2, AmpMode::kOff).tflops == Approx(0.384));
  // AMD's two 256-bit pipes: 8 lanes x 2 x 2; bf16 twice that with AVX512-BF16.
  CHECK(cpu_peak(amd, 3000000, 2, AmpMode::kOff).tflops == Approx(0.192));
  CHECK(cpu_peak(amd, 3000000, 2, AmpMode::kBf16).tflops == Approx(0.384));
  CHECK(cpu_peak(amd, 0, 2, AmpMode::kOff).tflops == 0);
  CHECK_THAT(cpu_peak(amd, 0, 2, AmpMode::kOff).source, Catch::Matchers::Contains("unknown"));
}

TEST_CASE("ranks sharing a GPU count its peak once, and an unknown peak stays unknown",
          "[train][benchmark]") {
  using nmt::train::hardware_peak_share;
  const nmt::train::HardwarePeak h200{989.0, "datasheet"};
  // 2 ranks on one H200: each adds half, so the job's peak is one H200's, not two.
  CHECK(hardware_peak_share(h200, 2) + hardware_peak_share(h200, 2) == 989.0);
  CHECK(hardware_peak_share(h200, 1) == 989.0);
  CHECK(hardware_peak_share(nmt::train::HardwarePeak{0.0, "unknown"}, 2) == 0.0);
}
