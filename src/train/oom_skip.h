#pragma once
// An update whose batch does not fit in memory on some rank is skipped by every rank together,
// instead of one rank dying (or, worse, waiting in its next collective while the others wait
// in theirs: the peers' most reported multi-GPU failure). The Updater catches the allocation
// failure in forward or backward, still takes part in the gradient all-reduce (with whatever
// it holds), and then all ranks agree in one small all-reduce whether anybody failed; if so,
// nobody steps, the gradients are dropped, the cached device memory is released, and the
// failed batches' shapes are logged. OomSkips counts them and stops the run after
// train.max_oom_skips in a row, naming the shapes and pointing at data.max_tokens.
//
// On a CPU an allocation fails rarely before the kernel's OOM killer acts, so tests and drills
// inject one: NMT_FAULT_OOM=RANK:STEP[:forward|backward][,...] makes rank RANK's update STEP
// throw what a failed CUDA allocation throws (c10::OutOfMemoryError), in its first batch's
// forward, or in the middle of its last batch's backward (after some gradient buckets have
// been launched).
//
//   OomSkips skips(max_in_row);
//   if (skips.record(step, failed_shapes)) ...;   // throws after max_in_row in a row

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nmt::train {

/// Where an injected allocation failure strikes.
enum class FaultPhase { kForward, kBackward };

/// One injected allocation failure.
struct OomFault {
  int64_t rank = 0;                         ///< the rank that fails
  int64_t step = 0;                         ///< the update (1-based step number) it fails in
  FaultPhase phase = FaultPhase::kForward;  ///< in forward, or in the middle of backward
};

/// The environment variable that injects failures.
inline constexpr const char* kOomFaultVariable = "NMT_FAULT_OOM";

/// Parses "RANK:STEP[:forward|backward]" entries separated by commas. Throws ConfigError
/// naming NMT_FAULT_OOM and the entry when one does not read.
std::vector<OomFault> parse_oom_faults(std::string_view text);

/// The faults NMT_FAULT_OOM asks for (none when unset or empty).
std::vector<OomFault> oom_faults_from_environment();

/// Throws c10::OutOfMemoryError saying it was injected (rank, step, phase).
[[noreturn]] void throw_injected_oom(int64_t rank, int64_t step, FaultPhase phase);

/// The skipped updates of a run, as every rank agreed on them.
class OomSkips {
 public:
  /// `max_in_row`: train.max_oom_skips.
  explicit OomSkips(int64_t max_in_row) : max_in_row_(max_in_row) {}
  /// After each update: `failed` has one entry per rank, its failed batch's description, ""
  /// when it did not fail. Returns whether the update was skipped (some rank failed). Throws
  /// nmt::Error naming the shapes and data.max_tokens when max_in_row updates in a row were.
  bool record(int64_t step, const std::vector<std::string>& failed);
  /// Updates skipped so far.
  int64_t total() const { return total_; }
  /// Updates skipped in a row up to now.
  int64_t in_row() const { return in_row_; }

 private:
  int64_t max_in_row_;
  int64_t total_ = 0;
  int64_t in_row_ = 0;
};

}  // namespace nmt::train
