#include "train/benchmark.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dist/device.h"
#include "util/error.h"

namespace nmt::train {
namespace {

std::string number(double v) { return std::isfinite(v) ? fmt::format("{}", v) : "null"; }

}  // namespace

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

double measure_peak_tflops(c10::Device device, amp::AmpMode mode, double seconds,
                           std::string* method) {
  at::ScalarType dtype = at::kFloat;
  if (mode == amp::AmpMode::kBf16) dtype = at::kBFloat16;
  if (mode == amp::AmpMode::kFp16) dtype = at::kHalf;
  const int64_t n = device.is_cuda() ? 8192 : 2048;
  const auto options = at::TensorOptions().dtype(dtype).device(device);
  const at::Tensor a = at::randn({n, n}, options);
  const at::Tensor b = at::randn({n, n}, options);
  at::Tensor c = at::empty({n, n}, options);
  const auto sync = [&] {
    if (device.is_cuda()) dist::synchronize_cuda(device.index());
  };
  at::mm_out(c, a, b);  // first call: allocation, kernel selection
  sync();
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  double best = INFINITY;
  int runs = 0;
  // At least 3 runs, then until the time is spent: the best run is the peak.
  while (runs < 3 || std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    const auto t0 = Clock::now();
    at::mm_out(c, a, b);
    sync();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
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
  std::string out = "{\n";
  const auto field = [&](const std::string& key, const std::string& value, bool last = false) {
    out += fmt::format("  \"{}\": {}{}\n", key, value, last ? "" : ",");
  };
  field("ranks", std::to_string(r.ranks));
  field("threads_per_rank", std::to_string(r.threads));
  field("device", fmt::format("\"{}\"", r.device));
  field("amp", fmt::format("\"{}\"", r.amp));
  field("synthetic", r.synthetic ? "true" : "false");
  field("warmup_steps", std::to_string(r.warmup));
  field("steps", std::to_string(r.steps));
  field("update_freq", std::to_string(r.update_freq));
  field("parameters", std::to_string(r.parameters));
  field("seconds", number(r.seconds));
  field("tokens_per_s", number(r.tokens_per_s()));
  field("target_tokens_per_s", number(r.target_tokens / r.seconds));
  field("padded_tokens_per_s", number(r.padded_tokens_per_s()));
  field("step_time_s", fmt::format("{{\"median\": {}, \"mean\": {}, \"min\": {}, \"max\": {}, "
                                   "\"p10\": {}, \"p90\": {}}}",
                                   number(r.step_time.median), number(r.step_time.mean),
                                   number(r.step_time.min), number(r.step_time.max),
                                   number(r.step_time.p10), number(r.step_time.p90)));
  field("time_split_s", fmt::format("{{\"data_wait\": {}, \"forward\": {}, \"backward\": {}, "
                                    "\"grad_sync\": {}, \"optimizer\": {}}}",
                                    number(r.data_wait_s), number(r.forward_s),
                                    number(r.backward_s), number(r.grad_sync_s),
                                    number(r.optimizer_s)));
  std::vector<std::string> memory;
  for (double mb : r.peak_memory_mb) memory.push_back(number(mb));
  field("peak_memory_mb", fmt::format("[{}]", fmt::join(memory, ", ")));
  field("model_flops_per_step", number(r.flops_per_step));
  field("achieved_tflops", number(r.achieved_tflops()));
  field("peak_tflops", number(r.peak_tflops));
  field("peak_method", fmt::format("\"{}\"", r.peak_method));
  field("mfu", number(r.mfu()));
  field("first_loss", number(r.first_loss));
  field("last_loss", number(r.last_loss), /*last=*/true);
  return out + "}\n";
}

std::string benchmark_table(const BenchmarkResult& r) {
  std::string memory;
  for (double mb : r.peak_memory_mb) memory += fmt::format(" {:.0f}", mb);
  return fmt::format(
      "benchmark: {} timed update(s) after {} warm-up, {} rank(s) x {} thread(s) on {}, amp {}{}\n"
      "  tokens/s          {:.0f} real, {:.0f} padded (source + target)\n"
      "  step time         median {:.4f} s (p10 {:.4f}, p90 {:.4f})\n"
      "  split per step    data {:.4f} | forward {:.4f} | backward {:.4f} | sync {:.4f} | "
      "optimizer {:.4f} s\n"
      "  model FLOPs       {:.3g} per step, {:.3f} TFLOP/s of a measured peak {:.3f}: MFU "
      "{:.1f}%\n"
      "  peak memory (MiB){}\n",
      r.steps, r.warmup, r.ranks, r.threads, r.device, r.amp, r.synthetic ? ", synthetic" : "",
      r.tokens_per_s(), r.padded_tokens_per_s(), r.step_time.median, r.step_time.p10,
      r.step_time.p90, r.data_wait_s, r.forward_s, r.backward_s, r.grad_sync_s, r.optimizer_s,
      r.flops_per_step, r.achieved_tflops(), r.peak_tflops, 100.0 * r.mfu(), memory);
}

}  // namespace nmt::train
