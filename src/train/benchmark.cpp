#include "train/benchmark.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dist/device.h"
#include "util/error.h"
#include "util/json_text.h"
#include "util/timer.h"

namespace nmt::train {

StepTimes summarize_step_times(std::vector<double> seconds) {
  NMT_CHECK(!seconds.empty(), Error, "benchmark: no timed steps to summarize");
  std::sort(seconds.begin(), seconds.end());
  const auto quantile = [&](double q) {
    // Linear interpolation between closest ranks (numpy's default).
    const double pos = q * double(seconds.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, seconds.size() - 1);
    return seconds[lo] + (seconds[hi] - seconds[lo]) * (pos - double(lo));
  };
  StepTimes t;
  t.median = quantile(0.5);
  t.p10 = quantile(0.1);
  t.p90 = quantile(0.9);
  t.min = seconds.front();
  t.max = seconds.back();
  double sum = 0;
  for (double s : seconds) sum += s;
  t.mean = sum / double(seconds.size());
  return t;
}

int64_t matmul_peak_size(const std::function<double(int64_t)>& product_seconds, double seconds,
                         int64_t largest) {
  // The size grows while one product takes under an eighth of the budget: the largest size
  // on hardware with fast kernels for the dtype, a smaller one where the dtype has only a
  // slow path (bf16 on a CPU without AVX512-BF16 ran a 2048 product in 77 s, and three of
  // them made a 4-minute benchmark start).
  int64_t n = 256;
  while (n < largest && product_seconds(n) < seconds / 8) n *= 2;
  return std::min(n, largest);
}

double measure_peak_tflops(c10::Device device, amp::AmpMode mode, double seconds,
                           std::string* method) {
  at::ScalarType dtype = at::kFloat;
  if (mode == amp::AmpMode::kBf16) dtype = at::kBFloat16;
  if (mode == amp::AmpMode::kFp16) dtype = at::kHalf;
  const int64_t largest = device.is_cuda() ? 8192 : 2048;
  const auto options = at::TensorOptions().dtype(dtype).device(device);
  const auto sync = [&] {
    if (device.is_cuda()) dist::synchronize_cuda(device.index());
  };
  const auto time_one = [&](const at::Tensor& a, const at::Tensor& b, at::Tensor& c) {
    const auto t0 = Clock::now();
    at::mm_out(c, a, b);
    sync();
    return seconds_since(t0);
  };
  at::Tensor a, b, c;
  const int64_t n = matmul_peak_size(
      [&](int64_t size) {
        a = at::randn({size, size}, options);
        b = at::randn({size, size}, options);
        c = at::empty({size, size}, options);
        at::mm_out(c, a, b);  // first call: allocation, kernel selection
        sync();
        return time_one(a, b, c);
      },
      seconds, largest);
  if (a.size(0) != n) {  // the rule stopped at largest without timing it
    a = at::randn({n, n}, options);
    b = at::randn({n, n}, options);
    c = at::empty({n, n}, options);
    at::mm_out(c, a, b);
    sync();
  }
  const auto start = Clock::now();
  double best = INFINITY;
  int runs = 0;
  // At least 3 runs, then until the time is spent: the best run is the peak.
  while (runs < 3 || seconds_since(start) < seconds) {
    best = std::min(best, time_one(a, b, c));
    ++runs;
  }
  if (method) {
    *method = fmt::format("best of {} {} {}x{} matmuls on {}{}", runs, c10::toString(dtype), n, n,
                          device.str(),
                          device.is_cuda() ? "" : fmt::format(" with {} thread(s)",
                                                              at::get_num_threads()));
  }
  return 2.0 * double(n) * double(n) * double(n) / best / 1e12;
}

std::string benchmark_json(const BenchmarkResult& r) {
  using Json = nlohmann::ordered_json;
  Json o;
  o["ranks"] = r.ranks;
  o["threads_per_rank"] = r.threads;
  o["device"] = r.device;
  o["amp"] = r.amp;
  o["synthetic"] = r.synthetic;
  o["warmup_steps"] = r.warmup;
  o["steps"] = r.steps;
  o["update_freq"] = r.update_freq;
  o["parameters"] = r.parameters;
  o["seconds"] = r.seconds;
  o["tokens_per_s"] = r.tokens_per_s();
  o["target_tokens_per_s"] = r.target_tokens / r.seconds;
  o["padded_tokens_per_s"] = r.padded_tokens_per_s();
  o["step_time_s"] = {{"median", r.step_time.median}, {"mean", r.step_time.mean},
                      {"min", r.step_time.min},       {"max", r.step_time.max},
                      {"p10", r.step_time.p10},       {"p90", r.step_time.p90}};
  o["time_split_s"] = {{"data_wait", r.data_wait_s},
                       {"forward", r.forward_s},
                       {"backward", r.backward_s},
                       {"grad_sync", r.grad_sync_s},
                       {"optimizer", r.optimizer_s}};
  o["phase_timing"] = {{"pass", r.separate_phase_pass ? "separate" : "headline"},
                       {"device_synced", r.phases_synced},
                       {"steps", r.phase_steps},
                       {"seconds", r.phase_seconds},
                       {"tokens_per_s", r.phase_tokens_per_s()}};
  o["peak_memory_mb"] = r.peak_memory_mb;
  o["model_flops_per_step"] = r.flops_per_step;
  o["kernel_flops_per_step"] = r.kernel_flops_per_step;
  o["achieved_tflops"] = r.achieved_tflops();
  o["hardware_peak_tflops"] = r.hardware_peak_tflops > 0 ? Json(r.hardware_peak_tflops) : Json();
  o["hardware_peak_source"] = r.hardware_peak_source;
  o["mfu"] = r.mfu();
  o["peak_tflops"] = r.peak_tflops;
  o["peak_method"] = r.peak_method;
  o["matmul_ceiling_fraction"] = r.matmul_ceiling_fraction();
  o["first_loss"] = r.first_loss;
  o["last_loss"] = r.last_loss;
  return json::pretty(o, 1);  // the nested objects on one line each, as the reference writes them
}

namespace {

/// Where the step times and split of the table come from, when not the headline pass.
std::string phase_note(const BenchmarkResult& r) {
  if (r.separate_phase_pass)
    return fmt::format("\n                    step time and split: {} more update(s) with a device "
                       "sync at each phase, {:.0f} tokens/s",
                       r.phase_steps, r.phase_tokens_per_s());
  if (!r.phases_synced) return "\n                    step time and split: host time only (no device sync)";
  return "";
}

}  // namespace

std::string benchmark_table(const BenchmarkResult& r) {
  std::string memory;
  for (double mb : r.peak_memory_mb) memory += fmt::format(" {:.0f}", mb);
  return fmt::format(
      "benchmark: {} timed update(s) after {} warm-up, {} rank(s) x {} thread(s) on {}, amp {}{}\n"
      "  tokens/s          {:.0f} real, {:.0f} padded (source + target)\n"
      "  step time         median {:.4f} s (p10 {:.4f}, p90 {:.4f}){}\n"
      "  split per step    data {:.4f} | forward {:.4f} | backward {:.4f} | sync {:.4f} | "
      "optimizer {:.4f} s\n"
      "  model FLOPs       {:.3g} per step on real tokens ({:.3g} padded), {:.3f} TFLOP/s\n"
      "  MFU               {} of the hardware peak ({})\n"
      "  matmul ceiling    {:.1f}% of {:.3f} TFLOP/s measured ({})\n"
      "  peak memory (MiB){}\n",
      r.steps, r.warmup, r.ranks, r.threads, r.device, r.amp, r.synthetic ? ", synthetic" : "",
      r.tokens_per_s(), r.padded_tokens_per_s(), r.step_time.median, r.step_time.p10,
      r.step_time.p90, phase_note(r), r.data_wait_s, r.forward_s, r.backward_s, r.grad_sync_s, r.optimizer_s,
      r.flops_per_step, r.kernel_flops_per_step, r.achieved_tflops(),
      std::isfinite(r.mfu()) ? fmt::format("{:.1f}%", 100.0 * r.mfu()) : std::string("unknown"),
      r.hardware_peak_source, 100.0 * r.matmul_ceiling_fraction(), r.peak_tflops, r.peak_method,
      memory);
}

}  // namespace nmt::train
