#include "train/oom_skip.h"

#include <cstdlib>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/error.h"
#include "util/log.h"

namespace nmt::train {
namespace {

/// A non-negative integer, the whole of `text`.
bool read_count(std::string_view text, int64_t& out) {
  if (text.empty() || text.size() > 18) return false;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  out = value;
  return true;
}

OomFault parse_one(std::string_view entry) {
  const auto fail = [&]() {
    NMT_THROW(ConfigError,
              "{}: expected RANK:STEP[:forward|backward] entries separated by commas, found '{}'",
              kOomFaultVariable, entry);
  };
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t colon = entry.find(':', start);
    parts.push_back(entry.substr(start, colon == std::string_view::npos ? colon : colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  OomFault fault;
  if (parts.size() < 2 || parts.size() > 3 || !read_count(parts[0], fault.rank) ||
      !read_count(parts[1], fault.step) || fault.step < 1)
    fail();
  if (parts.size() == 3) {
    if (parts[2] == "backward")
      fault.phase = FaultPhase::kBackward;
    else if (parts[2] != "forward")
      fail();
  }
  return fault;
}

std::string phase_name(FaultPhase phase) {
  return phase == FaultPhase::kForward ? "forward" : "backward";
}

}  // namespace

std::vector<OomFault> parse_oom_faults(std::string_view text) {
  std::vector<OomFault> out;
  if (text.empty()) return out;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    out.push_back(
        parse_one(text.substr(start, comma == std::string_view::npos ? comma : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<OomFault> oom_faults_from_environment() {
  const char* value = std::getenv(kOomFaultVariable);
  return value ? parse_oom_faults(value) : std::vector<OomFault>{};
}

void throw_injected_oom(int64_t rank, int64_t step, FaultPhase phase) {
  throw c10::OutOfMemoryError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                              fmt::format("out of memory, injected by {} (rank {}, step {}, {})",
                                          kOomFaultVariable, rank, step, phase_name(phase)));
}

bool OomSkips::record(int64_t step, const std::vector<std::string>& failed) {
  std::vector<std::string> named;
  for (size_t r = 0; r < failed.size(); ++r)
    if (!failed[r].empty()) named.push_back(fmt::format("rank {}: {}", r, failed[r]));
  if (named.empty()) {
    in_row_ = 0;
    return false;
  }
  ++total_;
  ++in_row_;
  NMT_CHECK(in_row_ < max_in_row_, nmt::Error,
            "out of memory in {} update(s) in a row (train.max_oom_skips {}), the last at step "
            "{} ({}): lower data.max_tokens (or set it to auto), or save memory with "
            "train.activation_checkpointing or dist.sharding",
            in_row_, max_in_row_, step, fmt::join(named, "; "));
  log::info("train", "update {} skipped by every rank: out of memory ({}); {} skipped so far", step,
            fmt::join(named, "; "), total_);
  return true;
}

}  // namespace nmt::train
