#pragma once
// The folder in which a corpus decoded on several ranks is built, so that a killed run resumes
// where it stopped: OUT is made in "OUT.parts/", which holds
//
//   manifest.json          the job's identity (input, checkpoints, every option that changes
//                          the output, the shard size): a resume must match it
//   manifest.lock          held while a rank opens the folder (checks or writes the manifest)
//   .lock                  the job's lock (util/run_dir_lock.h): one live job per output
//   shard-%08d.txt         the output lines of input lines [i * shard_lines, (i + 1) *
//                          shard_lines), written atomically once all of them are decoded
//   shard-%08d.json        who decoded that shard, and its figures (ShardRecord)
//   shard-%08d.lock        held by the rank decoding that shard (a dead rank's lock is free)
//
// When every shard exists, rank 0 concatenates them in order into OUT (atomically) and removes
// the folder. No LibTorch here.
//
//   ShardFolder folder(output, manifest, force, /*remove_temps=*/rank == 0);
//   if (auto claim = folder.claim(i, /*wait=*/false)) { ...decode...; folder.commit(i, text,
//   record); } folder.assemble(shards);

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/file_lock.h"

namespace nmt::decode {

/// What makes a corpus job's output: (key, value) pairs in a fixed order. Two runs may share
/// an OUT.parts folder only when their manifests are equal.
using Manifest = std::vector<std::pair<std::string, std::string>>;

/// The keys whose values differ between two manifests (a key only one has counts), in
/// `expected`'s order, then those only `found` has.
std::vector<std::string> manifest_differences(const Manifest& expected, const Manifest& found);

/// Manifest as the JSON text of manifest.json, and back (throws DataError naming `origin`).
std::string manifest_json(const Manifest& manifest);
Manifest parse_manifest(const std::string& text, const std::string& origin);

/// The figures of one decoded shard, kept beside it (shard-%08d.json).
struct ShardRecord {
  int64_t rank = 0;           ///< the rank that decoded it
  std::string run;            ///< the run (launch) that decoded it: tells resumed shards apart
  int64_t lines = 0;          ///< input lines
  int64_t source_tokens = 0;  ///< source pieces (EOS included)
  int64_t output_tokens = 0;  ///< pieces of the best hypotheses
  double seconds = 0;         ///< wall time of reading, decoding and writing it
};

/// Lines per shard of a corpus of `lines` lines decoded by world_size ranks: `requested` when
/// > 0; 0 (automatic): `stored` when set (the shard size of the run being resumed, so that a
/// resume on another number of ranks keeps its shards), else one shard per rank, at most
/// 10,000 lines. Shards are decoded one at a time, in batches sorted by length within the
/// shard: shards of 500 lines made one worker 20% slower than one shard of 5,000 lines.
int64_t shard_lines_for(int64_t requested, int64_t lines, int world_size,
                        std::optional<int64_t> stored);

/// The shard size recorded in OUT.parts/manifest.json of `output`; nullopt when there is
/// none, or it cannot be read (opening the folder then says what is wrong).
std::optional<int64_t> stored_shard_lines(const std::filesystem::path& output);

/// "OUT.parts": the folder of `output`.
std::filesystem::path parts_folder(const std::filesystem::path& output);
/// "shard-%08d.txt" (ext "txt"), ".json" or ".lock".
std::string shard_file_name(int64_t shard, std::string_view ext);
/// True for "shard-<8 digits>.txt" and ".json": the files whose temps a dead rank leaves.
bool is_shard_file_name(std::string_view name);

/// One rank's view of OUT.parts.
class ShardFolder {
 public:
  /// Creates the folder and, under manifest.lock, writes `manifest` or checks it against the
  /// stored one: a different one is a ConfigError naming the differing keys, unless `force`,
  /// which removes the shards and starts over. With remove_temps (one rank of a job), removes
  /// the temp files that dead writers left (util/atomic_file.h).
  ShardFolder(const std::filesystem::path& output, const Manifest& manifest, bool force,
              bool remove_temps);

  const std::filesystem::path& path() const { return path_; }
  /// Whether shard i's output exists.
  bool done(int64_t shard) const;
  /// Shard i's lock when it is not done and nobody else decodes it; waits for another
  /// holder with `wait` (a dead holder's lock is free), else returns nullopt when held.
  std::optional<FileLock> claim(int64_t shard, bool wait) const;
  /// Writes shard i's record, then its output (atomically; the output last, as done() reads it).
  void commit(int64_t shard, std::string_view text, const ShardRecord& record) const;
  /// Every shard's record, by shard (throws DataError for a missing or bad one).
  std::vector<ShardRecord> records(int64_t shards) const;
  /// Concatenates shards [0, shards) into `output` atomically, then removes the folder.
  void assemble(const std::filesystem::path& output, int64_t shards) const;

 private:
  std::filesystem::path path_;
};

}  // namespace nmt::decode
