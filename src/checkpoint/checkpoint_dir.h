#pragma once
// The checkpoints of a run: <run_dir>/checkpoints/checkpoint-<step, 8+ digits>.safetensors,
// with retention (newest keep_last plus keep_best lowest "selection") and the choice of what
// to resume from (the newest file that loads and verifies).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/checkpoint_options.h"

namespace nmt::checkpoint {


/// Says why a checkpoint that loads and verifies still cannot be resumed from here (e.g. it
/// is of another model), or nullopt when it can; a CheckpointError it throws marks the file
/// as damaged (e.g. malformed metadata), skipped like one that does not load.
using CheckpointFilter = std::function<std::optional<std::string>(const CheckpointData&)>;

/// One run's checkpoint folder. Only one process (rank 0) may save into it at a time.
class CheckpointDir {
 public:
  /// Checkpoints live in dir (created on the first save). Throws ConfigError when keep_last or
  /// keep_best is negative.
  CheckpointDir(std::filesystem::path dir, CheckpointOptions options);

  /// The folder.
  const std::filesystem::path& dir() const { return dir_; }
  /// dir/checkpoint-<step, zero-padded to 8 digits>.safetensors.
  std::filesystem::path path_for_step(int64_t step) const;
  /// Saves step's checkpoint, then deletes old ones: keeps the newest keep_last and the
  /// keep_best with the lowest metadata "selection" (run_metadata.h) (files without it are not "best"
  /// candidates). Never deletes the file just written. Returns the path.
  std::filesystem::path save(int64_t step, const CheckpointData& data);
  /// Checkpoint files, newest step first (temp files of interrupted saves are not listed).
  std::vector<std::filesystem::path> list() const;
  /// The newest checkpoint that loads (mapped: map_checkpoint), verifies and passes `reject`
  /// (when given); each newer
  /// file that does not is skipped with a warning that names it and says why. nullopt when
  /// there is none. When files load but `reject` refuses every one of them, throws
  /// CheckpointError naming the newest and the reason: starting fresh next to another run's
  /// checkpoints would mix two runs in one folder.
  std::optional<std::pair<std::filesystem::path, CheckpointData>> load_newest_valid(
      const CheckpointFilter& reject = {}) const;
  /// Moves the checkpoints of steps after `step` into a new subfolder
  /// "superseded-<UTC time>" and returns it; nullopt when there are none. A run that starts
  /// from `step` (0: from scratch) supersedes them: left in place, retention would delete this
  /// run's saves rather than them, and a resume or best_or_last would take them. Moved, not
  /// deleted: they are another run's work; a warning names the folder. Throws CheckpointError
  /// naming a file it cannot move.
  std::optional<std::filesystem::path> set_aside_after(int64_t step) const;
  /// Path of the checkpoint with the lowest "selection", else the newest; nullopt when none.
  /// Files whose header cannot be read are passed over.
  std::optional<std::filesystem::path> best_or_last() const;

 private:
  /// Deletes files not kept by the retention rules; `keep` is always kept.
  void apply_retention(const std::filesystem::path& keep) const;
  /// Deletes temp files left by an interrupted save.
  void remove_stale_temp_files() const;

  std::filesystem::path dir_;
  CheckpointOptions options_;
};

/// The checkpoint files a model is read from (nmt-translate, fine-tuning, export): `given` is
/// a file, or a run directory (or its checkpoints/ folder) whose best_or_last() is taken; with
/// average > 1, the newest `average` files of the run, oldest first (average_checkpoints keeps
/// the newest one's metadata). Throws ConfigError or CheckpointError naming what is missing.
std::vector<std::filesystem::path> model_checkpoints(const std::string& given, int64_t average = 1);

/// The step in a checkpoint file name ("checkpoint-00001000.safetensors" -> 1000), or nullopt
/// for any other name.
std::optional<int64_t> step_of_checkpoint_file(const std::filesystem::path& file);

}  // namespace nmt::checkpoint
