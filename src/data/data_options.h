#pragma once
// Corpus, vocabulary and batching (YAML section `data`).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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
/// What kind of data a training corpus holds, marked by a source tag (data/lang_tags.h).
enum class CorpusTag {
  kNone,             ///< real parallel data: no tag
  kBackTranslation,  ///< back-translated (synthetic source): `<BT>` first in the source
};

/// One training corpus of several (data.train).
struct CorpusOptions {
  std::string name;    ///< names it in logs, batch_stats.json and its token cache
  std::string src;     ///< source text, one sentence per line (.gz ok)
  std::string tgt;     ///< target text, aligned with src
  /// Share of an epoch relative to the corpus's size: 1 draws each pair once an epoch, 2
  /// twice (upsampled), 0.5 a different half each epoch (deterministic from seed and epoch).
  double weight = 1.0;
  /// `bt`: back-translated data, whose sources get the `<BT>` tag (Caswell et al. 2019).
  CorpusTag tag = CorpusTag::kNone;
  bool operator==(const CorpusOptions& o) const {
    return name == o.name && src == o.src && tgt == o.tgt && weight == o.weight && tag == o.tag;
  }
};

/// Inputs and batching. Paths are relative to the working directory.
struct DataOptions {
  /// Several weighted training corpora; empty: the one corpus train_src/train_tgt.
  std::vector<CorpusOptions> train;
  std::string train_src;                ///< training source text, one sentence per line (.gz ok)
  std::string train_tgt;                ///< training target text, aligned with train_src
  /// Several named validation sets (weights unused); empty: the one set valid_src/valid_tgt.
  /// Validation reports each; the first one picks the best checkpoint.
  std::vector<CorpusOptions> valid;
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
  /// Padded tokens per batch per rank (batch x longest). nullopt is `auto`: the most that
  /// fits, measured at start by train/max_tokens_fit.h, which alone resolves it.
  std::optional<int64_t> max_tokens = 4096;
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

}  // namespace nmt::data
