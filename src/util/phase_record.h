#pragma once
// <run_dir>/phases.jsonl: one line per long phase of a run as it ends (vocabulary, encoding,
// cache write, plan, first update), from whichever process ran it (the launcher prepares the
// data, the ranks plan and train), so a benchmark (scripts/bench/scale.sh) reads phase times
// from JSON rather than from log lines:
//
//   {"phase": "encoding", "pid": 4711, "end_unix": 1764676800.25, "seconds": 130.5,
//    "max_rss_mb": 412.5, "pairs": 5000000, ...}
//
// Each line is one write(2) to a file opened O_APPEND, so lines of processes that end phases at
// the same time do not interleave. A failed write is a warning: the run goes on.

#include <filesystem>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace nmt {

/// The file phase records go to.
std::filesystem::path phase_record_file(const std::filesystem::path& run_dir);

/// Appends {"phase", "pid", "end_unix" (now), "seconds", "max_rss_mb" (this process's peak
/// resident memory so far), then the members of `extra`} to phase_record_file(run_dir).
void record_phase(const std::filesystem::path& run_dir, const std::string& phase, double seconds,
                  const nlohmann::ordered_json& extra);

}  // namespace nmt
