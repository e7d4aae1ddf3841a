#pragma once
// The training data as one set of pairs drawn from several weighted corpora (data.train), each
// with its own token cache. Pair ids run over the corpora in order (corpus k's pairs follow
// corpus k-1's), and each epoch draws from every corpus in proportion to its weight: weight w
// on a corpus of n pairs takes floor(w) copies of every pair plus a sample of the rest of
// round(w n), chosen by a hash of (seed, epoch, corpus, pair), so a weight of 1 trains each
// pair once an epoch and 0.5 a different half each epoch. With data.sampling_temperature
// T != 1 the counts are reshaped first (data/corpus_sampling.h: shares in proportion to
// w n^(1/T), the epoch keeping its size), then drawn the same way. One corpus of weight 1 (the
// data.train_src shorthand) draws 0, 1, ..., n - 1: exactly the single-corpus plan.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/data_options.h"
#include "data/token_cache.h"

namespace nmt::data {

/// One corpus of the set.
struct CorpusPart {
  std::string name;
  double weight = 1.0;
  TokenCache cache;
};

/// Pairs drawn from a corpus in each epoch.
struct CorpusDraw {
  std::string name;
  int64_t pairs = 0;   ///< pairs kept in its token cache
  double weight = 1;
  int64_t drawn = 0;   ///< pairs an epoch trains on (with repeats when weight > 1)
};

/// Several token caches as one id space, with the per-epoch draw.
class CorpusSet {
 public:
  CorpusSet() = default;
  /// Throws DataError for no corpora, a weight <= 0, a temperature <= 0 or more than
  /// 2^32 - 1 pairs in total.
  explicit CorpusSet(std::vector<CorpusPart> parts, double temperature = 1.0);
  /// One corpus of weight 1 (what tests and single-corpus tools plan from).
  CorpusSet(const TokenCache& cache);  // NOLINT(google-explicit-constructor): a set of one

  /// Pairs over all corpora.
  int64_t size() const { return offsets_.empty() ? 0 : offsets_.back(); }
  int64_t src_length(int64_t id) const { return locate(id, [](const TokenCache& c, int64_t i) { return c.src_length(i); }); }
  int64_t tgt_length(int64_t id) const { return locate(id, [](const TokenCache& c, int64_t i) { return c.tgt_length(i); }); }
  int32_t src_id(int64_t id, int64_t k) const {
    return static_cast<int32_t>(locate(id, [k](const TokenCache& c, int64_t i) { return int64_t{c.src_id(i, k)}; }));
  }
  int32_t tgt_id(int64_t id, int64_t k) const {
    return static_cast<int32_t>(locate(id, [k](const TokenCache& c, int64_t i) { return int64_t{c.tgt_id(i, k)}; }));
  }
  /// The corpus of a pair id.
  size_t part_of(int64_t id) const;
  /// The token cache holding pair `id`, and the pair's index in it.
  std::pair<const TokenCache*, int64_t> locate(int64_t id) const {
    const size_t p = parts_.size() == 1 ? 0 : part_of(id);
    return {&parts_[p].cache, id - offsets_[p]};
  }
  const std::vector<CorpusPart>& parts() const { return parts_; }
  /// For messages: the token cache's path with one corpus, else "N corpora (a, b, ...)".
  std::string describe() const;

  /// The pair ids of an epoch, grouped by corpus, in id order within each; repeats for
  /// weights above 1.
  std::vector<uint32_t> draw(int64_t epoch, uint64_t seed) const;
  /// Per corpus: pairs, weight and pairs drawn each epoch (the same count every epoch).
  std::vector<CorpusDraw> draws() const;
  /// data.sampling_temperature the counts were drawn with.
  double temperature() const { return temperature_; }

 private:
  template <class Get>
  int64_t locate(int64_t id, Get get) const {
    if (parts_.size() == 1) return get(parts_[0].cache, id);  // the common case, no search
    const size_t p = part_of(id);
    return get(parts_[p].cache, id - offsets_[p]);
  }

  std::vector<CorpusPart> parts_;
  std::vector<int64_t> offsets_;  ///< offsets_[k]: first id of corpus k; back(): size()
  std::vector<int64_t> drawn_;    ///< pairs corpus k contributes to every epoch
  double temperature_ = 1.0;      ///< data.sampling_temperature
};

/// The training corpora a config names: data.train, or the one corpus "train" of
/// data.train_src/train_tgt.
std::vector<CorpusOptions> training_corpora(const DataOptions& options);

/// The validation sets a config names: data.valid, or the one set "valid" of
/// data.valid_src/valid_tgt, or none.
std::vector<CorpusOptions> validation_sets(const DataOptions& options);

}  // namespace nmt::data
