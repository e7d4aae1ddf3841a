#pragma once
// Fine-tuning (train.init_from): a fresh run that starts from another run's model. Here the
// source checkpoint is found and its metadata and vocabulary read (not its weights), the new
// config is checked against the vocabulary the model was trained with, and that vocabulary (its
// SentencePiece model files) is put into the new run's vocab/ folder, so the new data is
// encoded with it. The weights are read only when the model is built (load_init_weights) and
// copied into it by train/training_state.h (load_initial_parameters): a 13 GB source is not
// held by the launcher, nor by every rank through data preparation and batch planning. Once the
// run has a checkpoint of its own, it resumes from that and init_from plays no part.

#include <filesystem>
#include <optional>

#include "checkpoint/checkpoint_file.h"
#include "config/run_config.h"

namespace nmt::job {

/// A checkpoint file and what it holds.
struct LoadedCheckpoint {
  std::filesystem::path path;       ///< the file it was loaded from
  checkpoint::CheckpointData data;  ///< its tensors and metadata
};

/// Reads train.init_from (a file, or a run directory's best-or-newest checkpoint, as
/// nmt-translate picks): its metadata and vocabulary tensors only (data holds nothing else;
/// the checksum, over every byte, is checked by load_init_weights), and checks it against
/// `config`: data.joint_vocab, data.spm_model and data.vocab_size must agree with the vocabulary
/// it was trained with (ConfigError naming both sides otherwise). nullopt when
/// train.init_from is empty.
std::optional<LoadedCheckpoint> load_init_checkpoint(const config::RunConfig& config);

/// The model group and metadata of `source` (from load_init_checkpoint), the checksum checked
/// over the whole file, for the model just built; the caller drops them once copied. A file
/// whose metadata is no longer what load_init_checkpoint read is a CheckpointError.
checkpoint::CheckpointData load_init_weights(const LoadedCheckpoint& source);

/// Writes the source's SentencePiece model(s) to <run_dir>/vocab/ (joint.model, or src.model
/// and tgt.model), where data preparation then finds them, unless data.spm_model names the
/// model. A different model already there is a ConfigError: that run directory belongs to
/// another vocabulary.
void install_init_vocabulary(const LoadedCheckpoint& source, const config::RunConfig& config);

/// What the built-in launcher does before preparing the data for its workers: when
/// train.init_from is set and the run has no checkpoint of its own yet, read the source's
/// vocabulary (never its weights) and install it.
void prepare_init_vocabulary(const config::RunConfig& config);

}  // namespace nmt::job
