#pragma once
// The full training state of a rank in a checkpoint, and back: the model's parameters, the
// Adam moments, the loss scaler, every rank's random generator states, the SentencePiece
// model file(s) and the typed metadata (checkpoint/run_metadata.h: step, data position,
// validation record). One file restores every rank, so saving gathers the random states of
// all ranks first: a collective that every rank calls, while only rank 0 writes.

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/run_metadata.h"

namespace nmt::data {
struct Vocabularies;
}

namespace nmt::train {

class Updater;

/// Named tensors in a checkpoint.
using StateTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// Every rank's random generator states, named "rng.<kind>.<rank>" (kind "cpu", and "cuda" on
/// a GPU). Every rank must call it when several run.
StateTensors gather_rng_states(const Updater& updater);

/// A checkpoint of this state: the model, optimizer and scaler of `updater`, the generator
/// states from gather_rng_states, the vocabulary file(s) and `meta`.
checkpoint::CheckpointData make_checkpoint(Updater& updater, StateTensors rng_states,
                                           const data::Vocabularies& vocab,
                                           const checkpoint::RunMetadata& meta);

/// Restores what make_checkpoint saved into `updater` and into this rank's random generators,
/// and returns the metadata. Throws CheckpointError naming the mismatch: other model shapes,
/// another vocabulary, another number of ranks, missing or malformed metadata.
checkpoint::RunMetadata restore_checkpoint(const checkpoint::CheckpointData& saved,
                                           const std::filesystem::path& file, Updater& updater,
                                           const data::Vocabularies& vocab);

}  // namespace nmt::train
