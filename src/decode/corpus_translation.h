#pragma once
// A whole corpus decoded by every rank of a job, resumably (nmt-translate --nproc-per-node N,
// or its workers under torchrun, mpirun or Slurm). The input is cut into shards of
// shard_lines lines (corpus_shards.h's shard_lines_for); shard i is rank i % world_size's. Each
// rank streams the input (it holds one shard's lines at a time), decodes its shards (length-sorted
// batches by tokens within a shard, as translate_file does) and keeps each one atomically in
// OUT.parts/ (corpus_shards.h). Rank 0 then decodes what is still missing (a dead rank's shards; it
// waits for a live rank's), concatenates the shards in input order into OUT and writes the summary.
// A killed run started again with the same arguments decodes only the missing shards.
//
//   Translator translator(options, read_config);
//   translate_corpus(translator, options, corpus);   // every rank

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "decode/corpus_shards.h"
#include "decode/translate_options.h"
#include "decode/translator.h"

namespace nmt::decode {

/// How the ranks of a job wait for each other; unset functions (one process) wait for nobody.
struct CorpusSync {
  std::function<void()> opened;    ///< returns when every rank has opened OUT.parts
  std::function<void()> finished;  ///< says this rank ended its pass; on rank 0, returns when
                                   ///< every rank has said so
};

/// One rank's part in decoding a corpus.
struct CorpusOptions {
  std::string input;            ///< the text to translate (plain or gzip), read by every rank
  std::string output;           ///< where the translations go (built in "<output>.parts/")
  /// Set: score the pairs (input line i, targets line i) teacher-forced instead of translating
  /// (decode/pair_scoring.h's lines); the file is read by every rank.
  std::string targets;
  int64_t shard_lines = 0;      ///< input lines per shard; 0: automatic (shard_lines_for)
  int rank = 0;                 ///< this rank, in [0, world_size)
  int world_size = 1;           ///< ranks decoding the corpus together
  bool force = false;           ///< a folder of a run with other arguments: start over
  std::string run;              ///< the same for every rank of one launch; tells its shards apart
  std::string stats_json;       ///< rank 0 writes the summary here when set
  std::chrono::milliseconds progress_every{5000};  ///< least time between progress lines
  CorpusSync sync;                                 ///< the job's barriers
};

/// The identity of a corpus job: with --score the mode ("score"), the input and with --score
/// the targets (path, size, modification time), each model's checkpoint files (path, size,
/// modification time; keys "checkpoint" or "checkpoint<i>" when averaged, and for an ensemble
/// "model<m>_checkpoint..." per model and its weights as "ensemble_weights") and every option
/// that changes the output.
Manifest corpus_manifest(const CorpusOptions& corpus, const TranslateOptions& options,
                         const std::vector<ModelSource>& models);

/// Decodes this rank's shards; rank 0 then the missing ones, assembles the output and writes
/// the summary (JSON: lines, shards, what this run decoded, per rank). Throws ConfigError when
/// the folder holds another job's shards (without force), DataError for unreadable input.
void translate_corpus(Translator& translator, const TranslateOptions& options,
                      const CorpusOptions& corpus);

}  // namespace nmt::decode
