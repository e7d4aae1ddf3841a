#pragma once
// Padded tensors for one rank's batch, built ahead of time on a background thread so the
// training loop never waits for data.

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "data/batch_iterator.h"
#include "data/token_cache.h"

namespace nmt::data {

/// One rank's batch as tensors (CPU, int64, batch-first, right-padded with the pad id).
struct BatchTensors {
  at::Tensor src;      ///< [B, S]: source ids + EOS
  at::Tensor tgt_in;   ///< [B, T]: BOS + target ids (decoder input)
  at::Tensor tgt_out;  ///< [B, T]: target ids + EOS (what the decoder predicts)
  int64_t src_tokens = 0;         ///< real source tokens (with EOS)
  int64_t tgt_tokens = 0;         ///< real target tokens (with EOS)
  std::vector<int64_t> src_lengths;  ///< real source tokens of each row (with EOS)
  std::vector<int64_t> tgt_lengths;  ///< real target tokens of each row (with EOS)
  int64_t global_tgt_tokens = 0;  ///< real target tokens of this step over all ranks
  int64_t epoch = 0;              ///< epoch of the step
  IteratorState next;             ///< iterator position after this batch (for checkpoints)
  bool empty() const { return src_tokens == 0; }
};

/// Special ids used to build batches.
struct SpecialIds {
  int64_t pad = 0;
  int64_t decoder_start = 2;  ///< first token of the decoder input (model.decoder_start)
  int64_t eos = 3;
};

/// `sentences` pairs of `length` random ids above the special ones on both sides (no padding),
/// the decoder input starting with `decoder_start`, from a fixed random stream independent of the
/// training seed: what benchmark --synthetic and the max_tokens auto fit train on. Token
/// counts are this batch's (global_tgt_tokens too); epoch 1.
BatchTensors random_batch(int64_t sentences, int64_t length, int64_t src_vocab_size,
                          int64_t tgt_vocab_size, int64_t decoder_start);

/// Builds the tensors of a batch from the corpora (a token cache converts to a set of one).
BatchTensors make_batch_tensors(const CorpusSet& corpus, const Batch& batch,
                                const SpecialIds& ids);

/// Produces this rank's batches in plan order, `depth` ahead on a background thread.
class BatchPrefetcher {
 public:
  /// Starts at `start` (a saved IteratorState). depth 0 builds each batch on demand.
  /// With pin_memory (training on a GPU) each batch is made in page-locked memory, so that
  /// its non_blocking copy to the device really is asynchronous (from pageable memory it
  /// waits for the copy); needs CUDA.
  BatchPrefetcher(CorpusSet corpus, std::shared_ptr<const BatchPlanner> planner,
                  int64_t rank, IteratorState start, SpecialIds ids, int64_t depth,
                  bool pin_memory = false);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  /// The next batch; blocks until it is ready and rethrows a failure of the worker thread.
  BatchTensors next();
  /// Seconds next() spent waiting for the worker so far (data-wait time).
  double wait_seconds() const { return wait_seconds_; }
  /// Steps of the epoch plan it starts in (what is left of the epoch after `consumed`
  /// updates, if any); read before the worker moved on, so that callers need not plan the
  /// epoch again to say it (tens of millions of pairs take a minute to plan).
  int64_t first_plan_steps() const { return first_plan_steps_; }

 private:
  BatchTensors produce();
  void run();

  CorpusSet corpus_;
  BatchIterator iterator_;
  int64_t rank_;
  SpecialIds ids_;
  size_t depth_;
  bool pin_memory_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<BatchTensors> ready_;
  std::exception_ptr failure_;
  bool stop_ = false;
  double wait_seconds_ = 0;
  int64_t first_plan_steps_ = 0;
  std::thread worker_;
};

}  // namespace nmt::data
