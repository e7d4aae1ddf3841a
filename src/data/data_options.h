#pragma once
// Corpus, vocabulary and batching (YAML section `data`).

#include <algorithm>
#include <cstdint>
#include <string>

namespace nmt::data {

/// SentencePiece model type.
enum class SubwordModel { kUnigram, kBpe };
/// How batches are formed.
enum class Batching {
  kTokens,     ///< by padded tokens from length-sorted buckets, balanced across ranks
  kSentences,  ///< a fixed sentence count in corpus order (the naive way; for comparison)
};
/// What to do with a corpus line that is not valid UTF-8.
enum class InvalidUtf8Policy { kError, kSkip };

/// data.max_tokens: auto, stored as this value until measured (see Trainer::fit_max_tokens).
constexpr int64_t kMaxTokensAuto = 0;

/// Inputs and batching. Paths are relative to the working directory.
struct DataOptions {
  std::string train_src;                ///< training source text, one sentence per line (.gz ok)
  std::string train_tgt;                ///< training target text, aligned with train_src
  std::string valid_src;                ///< validation source text (empty: no validation)
  std::string valid_tgt;                ///< validation target text, aligned with valid_src
  std::string spm_model;                ///< existing SentencePiece model; empty: train one
  int64_t vocab_size = 8000;            ///< pieces in a trained SentencePiece model
  SubwordModel subword_model = SubwordModel::kUnigram;  ///< type of a trained model
  bool joint_vocab = true;              ///< one model for source and target
  int64_t spm_sample_lines = 1000000;   ///< lines sampled to train SentencePiece
  int64_t max_len = 256;                ///< longer sentences are filtered (tokens)
  double max_len_ratio = 3.0;           ///< pairs with a longer/shorter length ratio are filtered
  InvalidUtf8Policy invalid_utf8 = InvalidUtf8Policy::kError;  ///< invalid UTF-8 handling
  int64_t max_tokens = 4096;            ///< padded tokens per batch per rank (batch x longest);
                                        ///< kMaxTokensAuto: the most that fits, measured
  double auto_memory_fraction = 0.9;    ///< max_tokens auto: share of the memory a step may use
  int64_t auto_memory_mb = 0;           ///< max_tokens auto: memory to fit (MiB per rank); 0: the
                                        ///< GPU's free memory (on CPU, auto then means 4096)
  int64_t auto_max_tokens_limit = 65536;  ///< max_tokens auto: never more than this (tokens)
  int64_t max_sentences = 0;            ///< sentences per batch per rank; 0: no limit
  Batching batching = Batching::kTokens;  ///< sentences: naive batches of the same mean size
  double batch_overhead = 0.25;         ///< fixed cost of a batch (fraction of max_tokens):
                                        ///< higher gives fewer, fuller batches, more padding
  int64_t update_freq = 1;              ///< batches accumulated per optimizer update
  int64_t tokens_per_update = 0;        ///< global padded tokens per update; 0: use update_freq
  int64_t prefetch = 4;                 ///< batches prepared ahead on a background thread
};

/// The budget that data.max_tokens: auto stands for where nothing is measured (a dry run, CPU
/// without auto_memory_mb) and while measuring: 4096, or max_len + 2 when sentences may be longer.
inline int64_t unmeasured_max_tokens(const DataOptions& options) {
  return std::max<int64_t>(4096, options.max_len + 2);
}

}  // namespace nmt::data
