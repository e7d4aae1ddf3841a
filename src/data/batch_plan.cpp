#include "data/batch_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "data/plan_file.h"
#include "util/error.h"
#include "util/hash.h"
#include "util/phase_progress.h"

namespace nmt::data {
namespace {

/// Fisher-Yates with splitmix64, so every rank and every libstdc++ gives the same order
/// (std::shuffle's distribution is implementation-defined).
template <class T>
void deterministic_shuffle(T* items, size_t count, uint64_t stream) {
  for (size_t i = count; i > 1; --i) {
    stream = splitmix64(stream);
    std::swap(items[i - 1], items[stream % i]);
  }
}

}  // namespace

int64_t Step::global_tgt_tokens() const {
  int64_t total = 0;
  for (const Batch& b : batches) total += b.tgt_tokens;
  return total;
}

// The 40 bytes a batch that the header counts on.
static_assert(sizeof(EpochPlan::Span) == 40, "EpochPlan::Span grew");

Batch EpochPlan::batch(int64_t step, int64_t rank) const {
  const Span& s = span(step, rank);
  Batch b;
  b.pairs.assign(pairs.begin() + static_cast<std::ptrdiff_t>(s.begin),
                 pairs.begin() + static_cast<std::ptrdiff_t>(s.begin + s.size));
  b.src_len = s.src_len;
  b.tgt_len = s.tgt_len;
  b.src_tokens = s.src_tokens;
  b.tgt_tokens = s.tgt_tokens;
  return b;
}

Step EpochPlan::step(int64_t step) const {
  Step out;
  out.batches.reserve(static_cast<size_t>(ranks));
  for (int64_t r = 0; r < ranks; ++r) out.batches.push_back(batch(step, r));
  return out;
}

PlanStats EpochPlan::stats(int64_t max_tokens) const {
  PlanStats s;
  s.steps = num_steps();
  double busiest = 0, mean = 0, fill = 0;
  for (int64_t step = 0; step < s.steps; ++step) {
    int64_t step_max = 0, step_sum = 0;
    for (int64_t r = 0; r < ranks; ++r) {
      const Span& b = span(step, r);
      step_max = std::max(step_max, b.padded_tokens());
      step_sum += b.padded_tokens();
      if (b.size == 0) continue;
      ++s.batches;
      s.sentences += b.size;
      s.src_tokens += b.src_tokens;
      s.tgt_tokens += b.tgt_tokens;
      s.padded_tokens += b.padded_tokens();
      const double batch_fill =
          double(int64_t{b.size} * std::max(b.src_len, b.tgt_len)) / double(max_tokens);
      fill += batch_fill;
      s.max_batch_fill = std::max(s.max_batch_fill, batch_fill);
    }
    busiest += double(step_max);
    mean += double(step_sum) / double(ranks);
  }
  s.padding_efficiency =
      s.padded_tokens ? double(s.src_tokens + s.tgt_tokens) / double(s.padded_tokens) : 0;
  s.max_rank_token_imbalance = mean > 0 ? busiest / mean : 0;
  s.mean_batch_fill = s.batches ? fill / double(s.batches) : 0;
  return s;
}

bool operator==(const BatchPlanOptions& a, const BatchPlanOptions& b) {
  return a.max_tokens == b.max_tokens && a.max_sentences == b.max_sentences &&
         a.batch_overhead == b.batch_overhead && a.world_size == b.world_size &&
         a.accumulation == b.accumulation && a.seed == b.seed && a.batching == b.batching;
}

BatchPlanner::BatchPlanner(CorpusSet corpus, BatchPlanOptions options,
                           std::filesystem::path plan_dir)
    : corpus_(std::move(corpus)), options_(options), plan_dir_(std::move(plan_dir)) {
  NMT_CHECK(options_.world_size >= 1 && options_.accumulation >= 1, DataError,
            "batch plan: world size {} and accumulation {} must be >= 1", options_.world_size,
            options_.accumulation);
  NMT_CHECK(corpus_.size() >= options_.world_size, DataError,
            "{}: {} sentence pairs cannot give each of {} ranks a batch", corpus_.describe(),
            corpus_.size(), options_.world_size);
  int64_t longest = 0;
  for (int64_t i = 0; i < corpus_.size(); ++i)
    longest = std::max({longest, corpus_.src_length(i) + 1, corpus_.tgt_length(i) + 1});
  NMT_CHECK(longest <= options_.max_tokens, DataError,
            "{}: a sentence of {} tokens (with EOS) does not fit data.max_tokens {}",
            corpus_.describe(), longest, options_.max_tokens);
}

BatchPlanner::Slots BatchPlanner::slots_of_epoch(int64_t epoch) const {
  Slots slots;
  slots.ids = corpus_.draw(epoch, options_.seed);
  slots.src.resize(slots.ids.size());
  slots.tgt.resize(slots.ids.size());
  for (size_t j = 0; j < slots.ids.size(); ++j) {
    slots.src[j] = static_cast<int32_t>(corpus_.src_length(slots.ids[j]) + 1);
    slots.tgt[j] = static_cast<int32_t>(corpus_.tgt_length(slots.ids[j]) + 1);
  }
  return slots;
}

EpochPlan::Span BatchPlanner::make_span(const std::vector<uint32_t>& order, uint64_t begin,
                                        uint64_t end, const Slots& slots) {
  Span b;
  b.begin = begin;
  b.size = static_cast<uint32_t>(end - begin);
  for (uint64_t k = begin; k != end; ++k) {
    const int32_t s = slots.src[order[k]], t = slots.tgt[order[k]];
    b.src_len = std::max(b.src_len, s);
    b.tgt_len = std::max(b.tgt_len, t);
    b.src_tokens += s;
    b.tgt_tokens += t;
  }
  return b;
}

std::vector<EpochPlan::Span> BatchPlanner::cut_batches(const std::vector<uint32_t>& order,
                                                       const Slots& slots,
                                                       log::PhaseProgress* progress,
                                                       double progress_done) const {
  // best[j]: least cost of cutting order[0, j) into batches, where a batch costs its padded
  // tokens plus a fixed overhead. The backward scan stops once the budget is exceeded, as
  // adding pairs never lowers a batch's longest side.
  //
  // A batch holds at most max_tokens sentences (each has a token or more), max_sentences and
  // the n pairs there are, so best[j] looks back at most that many entries: best lives in a
  // ring of that size (never max_tokens' alone: 8 GB at 10^9), and only the cuts (4 bytes a
  // pair: pair ids are 32-bit) span the order: 200 MB at 50M pairs.
  const size_t n = order.size();
  const double overhead = options_.batch_overhead * double(options_.max_tokens);
  const auto max_sentences =
      options_.max_sentences > 0 ? options_.max_sentences : std::numeric_limits<int64_t>::max();
  const auto reach = static_cast<uint64_t>(
      std::min({options_.max_tokens, max_sentences, static_cast<int64_t>(n)}));
  size_t ring = 1;
  while (ring <= reach) ring <<= 1;
  const size_t mask = ring - 1;
  std::vector<double> best(ring, std::numeric_limits<double>::infinity());
  std::vector<uint32_t> cut(n + 1, 0);
  best[0] = 0;
  for (size_t j = 1; j <= n; ++j) {
    if (progress && j % 65536 == 0) progress->update(progress_done + double(j));
    double best_j = std::numeric_limits<double>::infinity();
    int64_t max_src = 0, max_tgt = 0;
    for (size_t i = j; i-- > 0;) {
      const int64_t count = static_cast<int64_t>(j - i);
      max_src = std::max<int64_t>(max_src, slots.src[order[i]]);
      max_tgt = std::max<int64_t>(max_tgt, slots.tgt[order[i]]);
      if (count > max_sentences || count * std::max(max_src, max_tgt) > options_.max_tokens) break;
      const double cost = best[i & mask] + double(count * (max_src + max_tgt)) + overhead;
      if (cost < best_j) best_j = cost, cut[j] = static_cast<uint32_t>(i);
    }
    best[j & mask] = best_j;  // overwrites best[j - ring]: out of every later batch's reach
  }
  std::vector<Span> batches;
  for (size_t j = n; j > 0; j = cut[j]) batches.push_back(make_span(order, cut[j], j, slots));
  std::reverse(batches.begin(), batches.end());
  return batches;
}

std::vector<EpochPlan::Span> BatchPlanner::balance(std::vector<Span> batches,
                                                   const std::vector<uint32_t>& order,
                                                   uint64_t stream, size_t w, size_t f,
                                                   const Slots& slots) const {
  // An update takes one batch per rank per accumulation step: split the largest batches until
  // the count divides. A batch's halves are runs of the order as the batch was.
  const size_t group = w * f;
  while (batches.size() % group != 0) {
    auto largest = std::max_element(batches.begin(), batches.end(),
                                    [](const Span& a, const Span& b) { return a.size < b.size; });
    if (largest->size < 2) {
      batches.emplace_back();  // fewer pairs than slots left: an empty batch keeps the shape
      continue;
    }
    const Span whole = *largest;
    const uint64_t half = whole.begin + whole.size / 2;
    *largest = make_span(order, whole.begin, half, slots);
    batches.push_back(make_span(order, half, whole.begin + whole.size, slots));
  }
  // Batches of near-equal cost share an update, so no rank waits long for another. Grouping
  // depends on ranks x accumulation only: 2 ranks x 1 step and 1 rank x 2 steps see the same
  // sentences in each update.
  std::vector<std::pair<uint64_t, size_t>> keys(batches.size());
  for (size_t i = 0; i < batches.size(); ++i)
    keys[i] = {splitmix64(stream ^ (batches[i].size == 0 ? i : order[batches[i].begin])), i};
  std::sort(keys.begin(), keys.end(), [&](const auto& a, const auto& b) {
    const int64_t ca = batches[a.second].padded_tokens(), cb = batches[b.second].padded_tokens();
    return ca != cb ? ca > cb : a < b;
  });
  // Group g's members at grouped[g x group, (g + 1) x group).
  const size_t groups = batches.size() / group;
  std::vector<Span> grouped(batches.size());
  for (size_t g = 0; g < groups; ++g) {
    for (size_t k = 0; k < group; ++k) grouped[g * group + k] = batches[keys[g * group + k].second];
    // Which rank gets the group's largest batch changes from update to update.
    deterministic_shuffle(&grouped[g * group], group, splitmix64(stream + g));
  }
  keys = {};
  batches = {};
  // The updates in a shuffled order (the shuffle's swaps depend on the count alone, so
  // shuffling the groups' numbers orders them as shuffling the groups would).
  std::vector<size_t> update_order(groups);
  std::iota(update_order.begin(), update_order.end(), size_t{0});
  deterministic_shuffle(update_order.data(), groups, splitmix64(stream ^ 0x5bd1e995u));
  std::vector<Span> steps;
  steps.reserve(grouped.size());
  for (size_t g : update_order)
    steps.insert(steps.end(), grouped.begin() + static_cast<std::ptrdiff_t>(g * group),
                 grouped.begin() + static_cast<std::ptrdiff_t>((g + 1) * group));
  return steps;
}

std::vector<uint32_t> BatchPlanner::length_order(uint64_t stream, const Slots& slots) const {
  return length_order_of(slots.src, slots.tgt, stream);
}

EpochPlan BatchPlanner::plan_epoch(int64_t epoch, const std::vector<ConsumedUpdates>& consumed) const {
  const uint64_t stream = splitmix64(splitmix64(options_.seed) ^ static_cast<uint64_t>(epoch));
  NMT_CHECK(consumed.empty() || options_.batching == Batching::kTokens, DataError,
            "epoch {}: data.batching sentences (a comparison mode) cannot continue an epoch "
            "under another global batch; resume with the ranks x update_freq it was saved with",
            epoch);
  // The plan is made over the epoch's draw (slots, data/corpus_set.h), and its batches then
  // name the pairs drawn; with one corpus of weight 1 slot j is pair j.
  const Slots slots = slots_of_epoch(epoch);
  // Tens of millions of pairs take a minute or more to plan: say how far it is, from before
  // the length order (10 s of it at 50M pairs), in pairs of the epoch's draw.
  log::PhaseProgress progress("data", fmt::format("planning epoch {}", epoch), "pairs",
                              double(slots.ids.size()));
  std::vector<uint32_t> order = length_order(stream, slots);
  for (const ConsumedUpdates& earlier : consumed) {
    // That plan's updates, one step of `group` batches each; drop the slots of its first ones.
    NMT_CHECK(earlier.group >= 1 && earlier.updates >= 0, DataError,
              "epoch {}: consumed updates ({} of {} batches) out of range", epoch,
              earlier.updates, earlier.group);
    const auto group = static_cast<size_t>(earlier.group);
    const std::vector<Span> updates =
        balance(cut_batches(order, slots), order, stream, group, 1, slots);
    NMT_CHECK(earlier.updates <= static_cast<int64_t>(updates.size() / group), DataError,
              "epoch {}: {} updates of {} batches were trained, but that plan has only {} (was "
              "the data changed since the checkpoint?)",
              epoch, earlier.updates, earlier.group, updates.size() / group);
    std::vector<char> used(slots.ids.size(), 0);
    for (size_t b = 0; b < static_cast<size_t>(earlier.updates) * group; ++b)
      for (uint64_t k = 0; k < updates[b].size; ++k) used[order[updates[b].begin + k]] = 1;
    order.erase(std::remove_if(order.begin(), order.end(), [&used](uint32_t j) { return used[j] != 0; }),
                order.end());
  }
  EpochPlan plan;
  plan.epoch = epoch;
  plan.ranks = options_.world_size;
  // Pairs that earlier updates trained count as done.
  const auto already = double(slots.ids.size() - order.size());
  plan.spans = balance(cut_batches(order, slots, &progress, already), order, stream,
                       static_cast<size_t>(options_.world_size),
                       static_cast<size_t>(options_.accumulation), slots);
  if (progress.reported()) progress.finish(double(slots.ids.size()));
  // The spans index the order, which becomes the plan's pairs: slots named by their pairs.
  for (uint32_t& slot : order) slot = slots.ids[slot];
  if (!consumed.empty()) order.shrink_to_fit();  // the pairs trained before were erased
  plan.pairs = std::move(order);
  if (options_.batching == Batching::kSentences) return plan_naive(plan);
  return plan;
}

std::shared_ptr<const EpochPlan> BatchPlanner::shared_plan(
    int64_t epoch, const std::vector<ConsumedUpdates>& consumed) const {
  std::lock_guard<std::mutex> lock(kept_mutex_);
  if (!kept_ || kept_->epoch != epoch || kept_consumed_ != consumed) {
    kept_.reset();  // before planning: two epochs' plans need not be held at once
    const auto make = [&] { return plan_epoch(epoch, consumed); };
    if (plan_dir_.empty()) {
      kept_ = std::make_shared<const EpochPlan>(make());
      ++plans_made_;
    } else {
      const SharedPlan shared = plan_through_files(plan_dir_, plan_key(epoch, consumed), make);
      kept_ = shared.plan;
      plans_made_ += shared.made ? 1 : 0;
    }
    kept_consumed_ = consumed;
  }
  return kept_;
}

uint64_t BatchPlanner::plan_key(int64_t epoch, const std::vector<ConsumedUpdates>& consumed) const {
  Fnv1a64 h;
  h.update("nmt batch plan 1");  // the planner's algorithm: a change of plans changes this
  for (const CorpusPart& part : corpus_.parts()) {
    h.update(part.cache.path().filename().string());  // the cache's name holds its content key
    h.update_value(part.cache.size());
    h.update_value(part.weight);
  }
  h.update_value(corpus_.temperature());
  h.update_value(options_.max_tokens);
  h.update_value(options_.max_sentences);
  h.update_value(options_.batch_overhead);
  h.update_value(options_.world_size);
  h.update_value(options_.accumulation);
  h.update_value(options_.seed);
  h.update_value(static_cast<int>(options_.batching));
  h.update_value(epoch);
  for (const ConsumedUpdates& c : consumed) {
    h.update_value(c.group);
    h.update_value(c.updates);
  }
  return h.digest();
}

int64_t BatchPlanner::plans_made() const {
  std::lock_guard<std::mutex> lock(kept_mutex_);
  return plans_made_;
}

EpochPlan BatchPlanner::plan_by_sentence_count(int64_t epoch, size_t per_rank) const {
  const auto w = static_cast<size_t>(options_.world_size);
  // The epoch's draw in corpus order (each corpus's pairs in file order).
  Slots slots = slots_of_epoch(epoch);
  const size_t n = slots.ids.size();
  EpochPlan plan;
  plan.epoch = epoch;
  plan.ranks = options_.world_size;
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::vector<Span> spans;
  for (size_t start = 0; start < n; start += per_rank * w) {
    for (size_t r = 0; r < w; ++r) {
      const size_t begin = std::min(n, start + r * per_rank);
      const size_t end = std::min(n, begin + per_rank);
      spans.push_back(make_span(order, begin, end, slots));
    }
  }
  plan.spans = std::move(spans);
  plan.pairs = std::move(slots.ids);  // slot j's pair, in the order of the spans
  return plan;
}

EpochPlan BatchPlanner::plan_naive(const EpochPlan& reference) const {
  const PlanStats target = reference.stats(options_.max_tokens);
  const double target_mean = double(target.padded_tokens) / double(std::max<int64_t>(1, target.batches));
  auto mean_padded = [](const PlanStats& s) {
    return double(s.padded_tokens) / double(std::max<int64_t>(1, s.batches));
  };
  // Mean padded tokens grow with the sentence count: binary search the largest that fits.
  size_t low = 1, high = std::max<size_t>(1, static_cast<size_t>(corpus_.size() / options_.world_size));
  while (low < high) {
    const size_t mid = (low + high + 1) / 2;
    if (mean_padded(plan_by_sentence_count(reference.epoch, mid).stats(options_.max_tokens)) <= target_mean)
      low = mid;
    else
      high = mid - 1;
  }
  return plan_by_sentence_count(reference.epoch, low);
}

}  // namespace nmt::data
