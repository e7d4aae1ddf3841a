#pragma once
// Token-bucketed batches, balanced across ranks.
//
// Each epoch, pairs are ordered along a Hilbert curve over (source length, target length), so
// neighbours in the order have similar lengths on both sides; ties are broken by a hash of
// (seed, epoch, pair), so batch composition varies between epochs. The order is cut into
// batches by dynamic programming that minimizes padded tokens plus a fixed cost per batch,
// under the padded-token budget. Batches are then grouped by cost, W ranks x F accumulation
// steps to an update, so every rank gets near-equal work, and the updates are shuffled. Every rank computes the same
// plan from the seed: no data needs to be sent.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <vector>

#include "data/corpus_set.h"
#include "data/flat_array.h"
#include "data/length_order.h"

namespace nmt::log {
class PhaseProgress;
}

namespace nmt::data {

/// Settings of the batch plan.
struct BatchPlanOptions {
  int64_t max_tokens = 4096;    ///< padded tokens per batch: sentences x longest (src or tgt)
  int64_t max_sentences = 0;    ///< sentences per batch; 0: no limit
  double batch_overhead = 0.25;  ///< fixed cost of a batch, as a fraction of max_tokens
  int64_t world_size = 1;       ///< ranks: batches per step
  int64_t accumulation = 1;     ///< steps per optimizer update (update_freq)
  uint64_t seed = 1;            ///< seed of the shuffles
  /// kSentences: plan_epoch returns plan_naive of the token plan (for comparison runs).
  Batching batching = Batching::kTokens;
};

/// Equal options plan equal epochs (over the same corpus).
bool operator==(const BatchPlanOptions& a, const BatchPlanOptions& b);
inline bool operator!=(const BatchPlanOptions& a, const BatchPlanOptions& b) { return !(a == b); }

/// One rank's batch: pairs of the TokenCache and its padded shape.
struct Batch {
  std::vector<uint32_t> pairs;  ///< indices into the TokenCache, in batch order
  int64_t src_len = 0;          ///< longest source, with EOS (padded width)
  int64_t tgt_len = 0;          ///< longest target, with BOS or EOS (padded width)
  int64_t src_tokens = 0;       ///< real source tokens, with EOS
  int64_t tgt_tokens = 0;       ///< real target tokens, with EOS (the loss's token count)
  int64_t size() const { return static_cast<int64_t>(pairs.size()); }
  /// Padded source + target tokens: the work and memory of this batch.
  int64_t padded_tokens() const { return size() * (src_len + tgt_len); }
};

/// The batches of one step, batches[r] for rank r.
struct Step {
  std::vector<Batch> batches;
  /// Real target tokens over all ranks: the loss of a step is normalized by the sum of this
  /// over the steps of an update.
  int64_t global_tgt_tokens() const;
};

/// Figures that describe a plan.
struct PlanStats {
  int64_t batches = 0;            ///< non-empty batches
  int64_t steps = 0;              ///< steps (each one batch per rank)
  int64_t sentences = 0;          ///< sentence pairs
  int64_t src_tokens = 0;         ///< real source tokens (with EOS)
  int64_t tgt_tokens = 0;         ///< real target tokens (with EOS)
  int64_t padded_tokens = 0;      ///< padded source + target tokens
  double padding_efficiency = 0;  ///< real / padded tokens, source and target together
  /// Sum over steps of the busiest rank's padded tokens over the sum of the mean rank's.
  double max_rank_token_imbalance = 0;
  double mean_batch_fill = 0;     ///< mean of sentences x longest side over max_tokens
  double max_batch_fill = 0;      ///< the same for the fullest batch: above 1 exceeds the budget
};

/// The steps of one epoch, stored flat: every batch is a run of one array of pair ids (the
/// length order the batches were cut from), so a plan costs 4 bytes a pair and 40 a batch,
/// and cutting needs no second copy of the ids. By our count planning peaks at the length
/// order (24 bytes a pair), before any batch is cut (figures at 20M pairs:
/// docs/performance-log.md). The arrays are owned by a plan made here, or mapped from the
/// plan file that one rank of the node wrote (data/plan_file.h).
struct EpochPlan {
  /// A batch as stored: pairs[begin, begin + size) and its padded shape (as in Batch).
  struct Span {
    uint64_t begin = 0;
    uint32_t size = 0;
    int32_t src_len = 0, tgt_len = 0;
    int64_t src_tokens = 0, tgt_tokens = 0;
    int64_t padded_tokens() const { return int64_t{size} * (int64_t{src_len} + tgt_len); }
  };
  int64_t epoch = 0;
  int64_t ranks = 1;            ///< batches per step
  FlatArray<uint32_t> pairs;    ///< indices into the corpus, batch after batch
  FlatArray<Span> spans;        ///< step s's batch for rank r at s x ranks + r
  int64_t num_steps() const { return static_cast<int64_t>(spans.size()) / ranks; }
  const Span& span(int64_t step, int64_t rank) const {
    return spans[static_cast<size_t>(step * ranks + rank)];
  }
  /// Rank `rank`'s batch of step `step`, with its pairs copied out.
  Batch batch(int64_t step, int64_t rank) const;
  /// The batches of step `step`, all ranks'.
  Step step(int64_t step) const;
  PlanStats stats(int64_t max_tokens) const;
};

/// Updates of an epoch already trained under another global batch: `updates` updates of a
/// plan whose updates each took `group` batches (ranks x accumulation steps). A run resumed
/// with another global batch plans the rest of its epoch from the pairs these did not use.
struct ConsumedUpdates {
  int64_t group = 1;    ///< batches per update (world_size x accumulation) of that plan
  int64_t updates = 0;  ///< its first updates, already trained
  bool operator==(const ConsumedUpdates& o) const { return group == o.group && updates == o.updates; }
};

/// Computes epoch plans for a corpus.
class BatchPlanner {
 public:
  /// Plans over `corpus` (one token cache converts to a set of one). Throws DataError when a
  /// sentence cannot fit max_tokens or there are fewer pairs than ranks. With `plan_dir`,
  /// shared_plan's plans go through files there, made by one process of those sharing the
  /// folder and mapped by all (data/plan_file.h): training passes the token cache's folder.
  BatchPlanner(CorpusSet corpus, BatchPlanOptions options, std::filesystem::path plan_dir = {});
  /// The plan of an epoch (1-based), the same on every rank for the same seed. With
  /// `consumed` (oldest first), the plan covers only the pairs that those earlier updates of
  /// the epoch did not train on: each is replanned in turn from what the ones before left
  /// over, so every pair is still trained once in the epoch. The sets of pairs per update
  /// depend on world_size x accumulation only, not on how it is split.
  EpochPlan plan_epoch(int64_t epoch, const std::vector<ConsumedUpdates>& consumed = {}) const;
  /// plan_epoch, kept: the last plan asked for here is handed to the next caller that asks
  /// for the same (epoch, consumed) instead of planned again. Iterators plan through it, so
  /// that amp.mode auto's timing and the training after it, sharing a planner, plan epoch 1
  /// once (tens of millions of pairs take a minute to plan). Thread-safe; one plan is kept.
  /// With a plan folder, the plan is mapped from its file there (made here only when no
  /// other process of the folder made it first).
  std::shared_ptr<const EpochPlan> shared_plan(
      int64_t epoch, const std::vector<ConsumedUpdates>& consumed = {}) const;
  /// Plans computed by shared_plan so far (each a plan_epoch): 1 for epoch 1 however many
  /// iterators start in it; 0 when another process's plan file was mapped instead.
  int64_t plans_made() const;
  /// The key of a plan: a hash of the corpora (their token caches and weights), the options,
  /// the epoch and `consumed`: the name of its file in the plan folder.
  uint64_t plan_key(int64_t epoch, const std::vector<ConsumedUpdates>& consumed) const;
  const std::filesystem::path& plan_dir() const { return plan_dir_; }
  /// For comparison: DataParallel-style batching by sentence count in corpus order, each
  /// global batch of world_size x B sentences split evenly across ranks, with the largest B
  /// whose mean padded tokens per batch do not exceed the reference plan's (the same average
  /// memory; its fullest batches then show what a sentence-count budget risks).
  EpochPlan plan_naive(const EpochPlan& reference) const;
  const BatchPlanOptions& options() const { return options_; }
  const CorpusSet& corpus() const { return corpus_; }

 private:
  /// An epoch's draw: slot j holds pair ids[j] with lengths src[j], tgt[j] (with EOS).
  struct Slots {
    std::vector<uint32_t> ids;
    std::vector<int32_t> src, tgt;
  };
  Slots slots_of_epoch(int64_t epoch) const;
  using Span = EpochPlan::Span;
  /// Batches of slots cut from `order` (slot indices): spans of `order`, in its sequence.
  std::vector<Span> cut_batches(const std::vector<uint32_t>& order, const Slots& slots,
                                log::PhaseProgress* progress = nullptr,
                                double progress_done = 0) const;
  /// The span order[begin, end) with its shape.
  static Span make_span(const std::vector<uint32_t>& order, uint64_t begin, uint64_t end,
                        const Slots& slots);
  /// The batches grouped into steps of `world` batches, `accumulation` steps an update: the
  /// spans in step order (step s, rank r at s x world + r).
  std::vector<Span> balance(std::vector<Span> batches, const std::vector<uint32_t>& order,
                            uint64_t stream, size_t world, size_t accumulation,
                            const Slots& slots) const;
  /// Slots in length order (Hilbert curve, then a per-epoch hash), the order batches are cut from.
  std::vector<uint32_t> length_order(uint64_t stream, const Slots& slots) const;
  EpochPlan plan_by_sentence_count(int64_t epoch, size_t sentences_per_rank) const;

  CorpusSet corpus_;
  BatchPlanOptions options_;
  std::filesystem::path plan_dir_;  ///< where shared_plan's plans are shared; empty: in memory
  /// shared_plan's one kept plan and what it was asked for.
  mutable std::mutex kept_mutex_;
  mutable std::shared_ptr<const EpochPlan> kept_;
  mutable std::vector<ConsumedUpdates> kept_consumed_;
  mutable int64_t plans_made_ = 0;
};

}  // namespace nmt::data
