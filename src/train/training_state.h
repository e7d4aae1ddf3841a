#pragma once
// The full training state of a rank in a checkpoint, and back: the model's parameters, the
// Adam moments, the loss scaler, every rank's random generator states, the SentencePiece
// model file(s) and the typed metadata (checkpoint/run_metadata.h: step, data position,
// validation record). One file restores every rank, so saving gathers the random states of
// all ranks (and a sharded optimizer's state) first: a collective that every rank calls,
// while only rank 0 writes.

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "checkpoint/tensor_layout.h"

namespace nmt::data {
struct Vocabularies;
}
namespace nmt::checkpoint {
struct CheckpointData;
struct RunMetadata;
}

namespace nmt::train {

class Updater;

/// Every rank's random generator states, named within the rng group ("<kind>.<rank>"; kind
/// "cpu", and "cuda" on a GPU). Every rank must call it when several run.
checkpoint::NamedTensors gather_rng_states(const Updater& updater);

/// What the ranks hand to the checkpoint that rank 0 writes.
struct GatheredState {
  checkpoint::NamedTensors rng;        ///< every rank's generator states (gather_rng_states)
  checkpoint::NamedTensors optimizer;  ///< the whole optimizer state; empty but on rank 0
};

/// Collects GatheredState: the random states, and the optimizer state that a sharded
/// optimizer (dist.sharding) keeps spread over the ranks. Every rank must call it when
/// several run.
GatheredState gather_state(Updater& updater);

/// A checkpoint of this state: the model and scaler of `updater`, what gather_state collected
/// (random states, optimizer state), the vocabulary file(s) and `meta`.
checkpoint::CheckpointData make_checkpoint(Updater& updater, GatheredState gathered,
                                           const data::Vocabularies& vocab,
                                           const checkpoint::RunMetadata& meta);

/// Fine-tuning: copies the model parameters (the model group) of another run's checkpoint into
/// `updater` (and restarts its moving average there), leaving optimizer, scaler, step count and
/// random streams fresh. Throws CheckpointError naming the tensor and both shapes when the
/// config's model differs from the checkpoint's, or the vocabulary differs.
void load_initial_parameters(const checkpoint::CheckpointData& saved,
                             const std::filesystem::path& file, Updater& updater,
                             const data::Vocabularies& vocab);

/// Throws CheckpointError naming both lists when the languages a checkpoint was trained on
/// (RunMetadata::languages) differ from this run's (`what`: "resuming" or "fine-tuning"): a
/// model's language tags and their meaning come with it.
void check_languages(const checkpoint::RunMetadata& meta, const std::vector<std::string>& languages,
                     const std::string& where, const char* what);

/// The seed of the random streams of a rank that a checkpoint has none for: one that resumes
/// a job on more ranks than saved it. FNV-1a of "seed/rank/step".
uint64_t fresh_rank_seed(int64_t seed, int64_t rank, int64_t step);

/// Restores what make_checkpoint saved into `updater` and into this rank's random generators,
/// and returns the metadata. The number of ranks may differ from the saved one: rank r
/// restores the streams of saved rank r, and ranks beyond those seed fresh streams with
/// fresh_rank_seed. The device may differ too: a stream this device has and the checkpoint
/// lacks (a CPU checkpoint resumed on a GPU: no "cuda" state) starts from fresh_rank_seed,
/// the streams it has are restored over that, and one this device lacks (a GPU checkpoint on
/// a CPU) is left unused; both are logged. (The data position is mapped by the caller,
/// data/batch_iterator.h.) Throws
/// CheckpointError naming the mismatch: other model shapes, another vocabulary, missing or
/// malformed metadata.
checkpoint::RunMetadata restore_checkpoint(const checkpoint::CheckpointData& saved,
                                           const std::filesystem::path& file, Updater& updater,
                                           const data::Vocabularies& vocab);

}  // namespace nmt::train
