#pragma once
// Epoch plans made once per node and shared through a file. Every rank needs the same plan
// (the batches of all ranks, so that updates stay balanced), and planning tens of millions of
// pairs takes 24 bytes a pair while it runs: made by each rank, a node with 8 ranks held 8
// copies of that, and 8 copies of the plan after it. Here the first rank to ask plans under
// a lock in the token cache's folder and writes the plan to a file (atomically: never seen
// half written); the other ranks wait for the lock and map the file (MAP_SHARED, read only:
// one copy in the page cache for the node, as the token cache is), and so does the planner,
// which then drops its own copy. A plan is a pure function of the corpus, the plan options,
// the epoch and the updates consumed before a resume, all in the file's key, so two writers
// (hosts whose file system does not pass flock on) write the same bytes.
//
// Layout (native byte order, every offset 8-aligned): a 56-byte header (magic "NMTPLAN",
// format version, the size of a span, key, epoch, ranks, span and pair counts), then the
// spans (40 bytes each: EpochPlan::Span's fields, padding zeroed), then the pair ids (4 bytes).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "data/batch_plan.h"

namespace nmt::data {

/// "plan.<key, 16 hex digits>.bin".
std::string plan_file_name(uint64_t key);

/// Writes `plan` under `key` to `file` atomically (temp file, fsync, rename). Throws
/// CheckpointError naming the file when it cannot be written.
void write_plan_file(const std::filesystem::path& file, const EpochPlan& plan, uint64_t key);

/// Maps a plan file written under `key`. Throws DataError naming the file when it is not one
/// (another key or format, truncated, a batch outside the pair ids).
EpochPlan map_plan_file(const std::filesystem::path& file, uint64_t key);

/// A plan from plan_through_files, and whether this call made it.
struct SharedPlan {
  std::shared_ptr<const EpochPlan> plan;  ///< mapped from its file
  bool made = false;                      ///< planned here (false: mapped another's)
};

/// The plan under `key` in `dir` (created if needed): mapped from its file when one exists,
/// else made by `make`, written and mapped, under the folder's lock ("plan.lock"), so one
/// process plans and the others wait, then map. A file that does not read as a plan of `key`
/// is planned again (with a warning). Writing removes the folder's other plan files (an
/// epoch's plan is asked for at its start by every rank, and mapped files stay readable
/// after their removal) and the temporary files of writers that died.
SharedPlan plan_through_files(const std::filesystem::path& dir, uint64_t key,
                              const std::function<EpochPlan()>& make);

}  // namespace nmt::data
