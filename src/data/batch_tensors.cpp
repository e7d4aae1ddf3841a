#include "data/batch_tensors.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <chrono>

#include "util/timer.h"

namespace nmt::data {

BatchTensors random_batch(int64_t sentences, int64_t length, int64_t src_vocab_size,
                          int64_t tgt_vocab_size, int64_t decoder_start) {
  at::Generator generator = at::detail::createCPUGenerator(12345);
  const int64_t first = 4;  // above pad, unk, bos and eos
  const auto random_ids = [&](int64_t size) {
    return at::randint(first, std::max(first + 1, size), {sentences, length}, generator, at::kLong);
  };
  BatchTensors b;
  b.src = random_ids(src_vocab_size);
  b.tgt_out = random_ids(tgt_vocab_size);
  b.tgt_in = at::cat(
      {at::full({sentences, 1}, decoder_start, at::kLong), b.tgt_out.slice(1, 0, length - 1)}, 1);
  b.src_tokens = sentences * length;
  b.tgt_tokens = sentences * length;
  b.src_lengths.assign(static_cast<size_t>(sentences), length);
  b.tgt_lengths.assign(static_cast<size_t>(sentences), length);
  b.global_tgt_tokens = b.tgt_tokens;
  b.epoch = 1;
  return b;
}

BatchTensors make_batch_tensors(const CorpusSet& corpus, const Batch& batch,
                                const SpecialIds& ids) {
  BatchTensors t;
  const int64_t b = batch.size();
  t.src = at::full({b, batch.src_len}, ids.pad, at::kLong);
  t.tgt_in = at::full({b, batch.tgt_len}, ids.pad, at::kLong);
  t.tgt_out = at::full({b, batch.tgt_len}, ids.pad, at::kLong);
  auto src = t.src.accessor<int64_t, 2>();
  auto tgt_in = t.tgt_in.accessor<int64_t, 2>();
  auto tgt_out = t.tgt_out.accessor<int64_t, 2>();
  t.src_lengths.reserve(static_cast<size_t>(b));
  t.tgt_lengths.reserve(static_cast<size_t>(b));
  for (int64_t row = 0; row < b; ++row) {
    const auto [cache, pair] = corpus.locate(batch.pairs[static_cast<size_t>(row)]);
    const int64_t s = cache->src_length(pair), n = cache->tgt_length(pair);
    t.src_lengths.push_back(s + 1);  // with EOS
    t.tgt_lengths.push_back(n + 1);
    for (int64_t k = 0; k < s; ++k) src[row][k] = cache->src_id(pair, k);
    src[row][s] = ids.eos;
    tgt_in[row][0] = ids.decoder_start;
    for (int64_t k = 0; k < n; ++k) {
      const int32_t id = cache->tgt_id(pair, k);
      tgt_in[row][k + 1] = id;
      tgt_out[row][k] = id;
    }
    tgt_out[row][n] = ids.eos;
  }
  t.src_tokens = batch.src_tokens;
  t.tgt_tokens = batch.tgt_tokens;
  return t;
}

BatchPrefetcher::BatchPrefetcher(CorpusSet corpus,
                                 std::shared_ptr<const BatchPlanner> planner, int64_t rank,
                                 IteratorState start, SpecialIds ids, int64_t depth,
                                 bool pin_memory)
    : corpus_(std::move(corpus)),
      iterator_(std::move(planner), start),
      rank_(rank),
      ids_(ids),
      depth_(static_cast<size_t>(std::max<int64_t>(0, depth))),
      pin_memory_(pin_memory),
      first_plan_steps_(iterator_.steps_in_epoch()) {
  if (depth_ > 0) worker_ = std::thread([this] { run(); });
}

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

BatchTensors BatchPrefetcher::produce() {
  const Step& step = iterator_.next();
  BatchTensors t = make_batch_tensors(corpus_, step.batches[static_cast<size_t>(rank_)], ids_);
  t.global_tgt_tokens = step.global_tgt_tokens();
  t.next = iterator_.state();
  t.epoch = iterator_.last_epoch();
  if (pin_memory_) {
    t.src = t.src.pin_memory();
    t.tgt_in = t.tgt_in.pin_memory();
    t.tgt_out = t.tgt_out.pin_memory();
  }
  return t;
}

void BatchPrefetcher::run() {
  try {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [this] { return stop_ || ready_.size() < depth_; });
        if (stop_) return;
      }
      BatchTensors t = produce();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.push_back(std::move(t));
      }
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    failure_ = std::current_exception();
    changed_.notify_all();
  }
}

BatchTensors BatchPrefetcher::next() {
  if (depth_ == 0) return produce();
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return !ready_.empty() || failure_; });
  wait_seconds_ += seconds_since(start);
  if (ready_.empty()) std::rethrow_exception(failure_);
  BatchTensors t = std::move(ready_.front());
  ready_.pop_front();
  lock.unlock();
  changed_.notify_all();
  return t;
}

}  // namespace nmt::data
