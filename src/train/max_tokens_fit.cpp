#include "train/max_tokens_fit.h"

#include <algorithm>
#include <cctype>
#include <chrono>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/batch_tensors.h"
#include "data/prepare.h"
#include "dist/device.h"
#include "dist/host_allocator.h"
#include "dist/process_group.h"
#include "train/run_setup.h"
#include "train/updater.h"
#include "util/error.h"
#include "util/log.h"
#include "util/timer.h"

namespace nmt::train {
namespace {

constexpr double kMiB = 1 << 20;

/// Why nothing can be measured here, or "" when it can.
std::string fallback_reason(const RunSetup& setup) {
  if (setup.device.is_cuda()) return "";
  if (setup.data.auto_memory_mb == 0)
    return "on CPU there is no device memory to fill (set data.auto_memory_mb to fit a host "
           "memory budget)";
  if (!dist::host_allocator_installed())
    return "on CPU the peak is measured by the caching host allocator, which "
           "train.cache_host_memory: false turns off";
  return "";
}

/// Measures this rank's fit with a probe Updater; `failure` receives why none was found.
void measure(const RunSetup& setup, const data::PreparedData& data, int64_t memory,
             MaxTokensFit& fit, std::string& failure) {
  const data::DataOptions& d = setup.data;
  const bool cuda = setup.device.is_cuda();
  const int index = cuda ? setup.device.index() : -1;
  fit.memory_mb = double(memory) / kMiB;
  // NCCL allocates its buffers itself, at its first collective: no probe sees them.
  if (cuda && setup.communicator && setup.communicator->backend_name() == "nccl")
    fit.headroom_mb = double(dist::kNcclHeadroomBytes) / kMiB;
  fit.limit_mb = std::max(0.0, fit.memory_mb - fit.headroom_mb) * d.auto_memory_fraction;
  RunSetup probe_setup = setup;
  probe_setup.max_tokens = unmeasured_max_tokens(d);  // the budget auto stands for meanwhile
  Updater probe(updater_setup(probe_setup, data.vocab));
  // Probes do not sync. With several ranks the gradients live in the all-reduce's buckets,
  // which the first zero_grad allocates: the peak below counts them.
  probe.set_gradient_sync(false);
  const auto step = [&](int64_t sentences) -> std::optional<int64_t> {
    probe.zero_grad();
    if (cuda) {
      dist::synchronize_cuda(index);
      dist::reset_peak_cuda_memory(index);
    } else {
      dist::reset_host_allocator_peak();
    }
    try {
      probe.forward_backward(data::random_batch(sentences, fit.length, data.vocab.src.size(),
                                                data.vocab.tgt.size(),
                                                batch_ids(setup.model, data.vocab).decoder_start));
      dist::synchronize_cuda(index);
    } catch (const c10::Error& e) {
      // Not only OutOfMemoryError: cuBLAS and NCCL report failed allocations as plain errors.
      if (!dist::is_out_of_memory(e)) throw;
      probe.zero_grad();
      dist::release_cached_cuda_memory();
      log::debug("train", "max_tokens auto: {} x {} tokens: out of memory", sentences, fit.length);
      return std::nullopt;
    }
    const int64_t peak = cuda ? dist::peak_cuda_memory_bytes(index)
                              : dist::host_allocator_stats().peak_in_use_bytes;
    probe.zero_grad();
    log::debug("train", "max_tokens auto: {} x {} tokens: peak {:.0f} MiB", sentences, fit.length,
               double(peak) / kMiB);
    return peak;
  };
  BatchFitOptions options;
  options.limit_bytes = static_cast<int64_t>(fit.limit_mb * kMiB);
  options.max_sentences = d.auto_max_tokens_limit / fit.length;
  if (d.max_sentences > 0) options.max_sentences = std::min(options.max_sentences, d.max_sentences);
  options.first_guess = std::max<int64_t>(2, 4096 / fit.length);
  try {
    const BatchFitResult result = fit_batch(step, options);
    fit.sentences = result.sentences;
    fit.peak_mb = double(result.peak_bytes) / kMiB;
    fit.probes = result.probes;
    fit.max_tokens = result.sentences * fit.length;
  } catch (const Error& e) {
    failure = fmt::format("rank {}: {} (sentences of {} tokens, the longest in {}; "
                          "data.auto_memory_mb and data.auto_memory_fraction set the limit)",
                          setup.rank, e.what(), fit.length, data.train.describe());
  }
}

/// Every rank's fit (or failure), and the smallest: all ranks use it, or all stop.
void agree(dist::Communicator* comm, MaxTokensFit& fit, const std::string& failure) {
  std::vector<std::string> all{failure.empty() ? std::to_string(fit.max_tokens) : failure};
  if (comm) all = comm->all_gather_strings(all[0]);
  for (const std::string& other : all) {
    NMT_CHECK(!other.empty() && std::isdigit(static_cast<unsigned char>(other[0])), ConfigError,
              "data.max_tokens auto: {}", other);
    fit.max_tokens = std::min<int64_t>(fit.max_tokens, std::stoll(other));
  }
}

MaxTokensFit fit_max_tokens(const RunSetup& setup, const data::PreparedData& data,
                            int64_t ranks_per_device) {
  const auto start = std::chrono::steady_clock::now();
  const data::DataOptions& d = setup.data;
  MaxTokensFit fit;
  const data::CorpusSet& corpus = data.train;
  fit.length = 2;
  for (int64_t i = 0; i < corpus.size(); ++i)
    fit.length = std::max({fit.length, corpus.src_length(i) + 1, corpus.tgt_length(i) + 1});
  fit.fallback = fallback_reason(setup);
  fit.max_tokens = unmeasured_max_tokens(d);
  dist::Communicator* comm = setup.communicator.get();
  int64_t memory = d.auto_memory_mb * (int64_t{1} << 20);
  // Every rank reads the device's free memory before any of them probes.
  if (comm) comm->barrier();
  if (fit.fallback.empty() && memory == 0) {
    const dist::CudaMemory m = dist::cuda_memory(setup.device.index());
    // What this rank holds already, plus its share of what no one holds.
    memory = m.reserved + m.free / std::max<int64_t>(1, ranks_per_device);
  }
  if (comm) comm->barrier();
  std::string failure;  // why this rank found no fit: every rank must hear it, or they hang
  if (fit.fallback.empty()) measure(setup, data, memory, fit, failure);
  agree(comm, fit, failure);
  fit.seconds = seconds_since(start);
  return fit;
}

}  // namespace

nlohmann::ordered_json MaxTokensFit::to_json() const {
  using Json = nlohmann::ordered_json;
  Json measured = Json::array();
  for (const BatchProbe& p : probes) {
    Json o{{"sentences", p.sentences}, {"tokens", p.sentences * length}};
    // null: out of memory
    o["peak_mb"] = p.peak_bytes ? Json(double(*p.peak_bytes) / kMiB) : Json();
    measured.push_back(std::move(o));
  }
  Json o;
  o["max_tokens"] = max_tokens;
  o["sentences"] = sentences;
  o["length"] = length;
  o["peak_mb"] = peak_mb;
  o["memory_mb"] = memory_mb;
  o["headroom_mb"] = headroom_mb;
  o["limit_mb"] = limit_mb;
  o["probes"] = std::move(measured);
  o["seconds"] = seconds;
  o["fallback"] = fallback;
  return o;
}

MaxTokensChoice choose_max_tokens(std::optional<int64_t> configured, const RunSetup& setup,
                                  const data::PreparedData& data, int64_t ranks_per_device) {
  if (configured) return {*configured, std::nullopt};
  MaxTokensFit fit = fit_max_tokens(setup, data, ranks_per_device);
  const data::DataOptions& d = setup.data;
  if (!fit.fallback.empty()) {
    log::warn("train", "data.max_tokens auto: {}; using {}", fit.fallback, fit.max_tokens);
  } else {
    log::info("train",
              "data.max_tokens auto: {} ({} sentences of the longest length, {} tokens, peak "
              "{:.0f} MiB of {:.0f} MiB allowed = {} x {:.0f} MiB){}; {} steps measured in {:.1f} s",
              fit.max_tokens, fit.sentences, fit.length, fit.peak_mb, fit.limit_mb,
              d.auto_memory_fraction, fit.memory_mb,
              fit.max_tokens < fit.sentences * fit.length ? ", the smallest rank's fit" : "",
              fit.probes.size(), fit.seconds);
  }
  return {fit.max_tokens, std::move(fit)};
}

int64_t unmeasured_max_tokens(const data::DataOptions& options) {
  return std::max<int64_t>(4096, options.max_len + 2);
}

int64_t max_tokens_to_plan(const data::DataOptions& options) {
  if (options.max_tokens) return *options.max_tokens;
  const int64_t budget = unmeasured_max_tokens(options);
  log::info("dry-run", "data.max_tokens auto is measured when training starts; this plan uses "
            "{} (--set data.max_tokens=N plans another budget)", budget);
  return budget;
}

std::string describe_max_tokens(const data::DataOptions& options) {
  return options.max_tokens ? std::to_string(*options.max_tokens) : "auto (measured at start)";
}

}  // namespace nmt::train
