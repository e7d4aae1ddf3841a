#pragma once
// Where each rank is, kept in the job's store so that a rank that stalls is named by its
// peers. Every rank marks the same sequence of places ("step 101: backward done"); when a
// collective fails, or (NCCL, which the host does not wait for) when the marks stop coming,
// report() says which ranks are behind ("rank 1 is at 'step 100: backward done', the others at
// 'step 101: ...'"). One small store write per mark: mark once or twice per update, not every
// collective. The Communicator owns one and adds its report to every failure.
//
//   comm.progress().mark(fmt::format("step {}: backward done", step));

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace nmt::dist {

class HangMonitor;
class KeyValueStore;

/// One rank's mark as read back: -1 marks when it has marked nothing yet.
struct RankMark {
  int64_t count = -1;   ///< places this rank has marked before this one
  std::string place;    ///< the place it marked last
};

/// The report on the ranks' marks: "; behind: rank 1 is at '...'; the others are at '...'
/// (this is rank R)", or, when none is behind, that every rank got to the same place.
std::string describe_progress(const std::vector<RankMark>& marks, int this_rank);

/// This rank's progress marks, and the report on everyone's.
class ProgressMarks {
 public:
  /// Marks of `rank` of `world_size` ranks in `store`. With `watch_after`, a HangMonitor logs
  /// the report as an error when no mark has come for that long.
  ProgressMarks(std::shared_ptr<KeyValueStore> store, int rank, int world_size,
                std::optional<std::chrono::milliseconds> watch_after);
  ~ProgressMarks();
  ProgressMarks(const ProgressMarks&) = delete;
  ProgressMarks& operator=(const ProgressMarks&) = delete;

  /// Records that this rank is at `place`. Throws DistError when the store fails.
  void mark(const std::string& place);
  /// The report on every rank's marks ("" until this rank has marked one). Asked on a helper
  /// thread with a deadline of 3 s: the store lives in rank 0, which may be the rank that
  /// stalled; then it says the progress is unknown.
  std::string report() const;

 private:
  std::shared_ptr<KeyValueStore> store_;
  int rank_ = 0;
  int world_size_ = 1;
  std::atomic<bool> marked_{false};
  int64_t count_ = 0;  ///< places marked so far
  /// Declared last: it stops before the rest goes away.
  std::unique_ptr<HangMonitor> monitor_;
};

}  // namespace nmt::dist
