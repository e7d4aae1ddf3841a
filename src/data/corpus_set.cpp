#include "data/corpus_set.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "data/corpus_sampling.h"
#include "util/error.h"
#include "util/hash.h"

namespace nmt::data {

CorpusSet::CorpusSet(std::vector<CorpusPart> parts, double temperature)
    : parts_(std::move(parts)), temperature_(temperature) {
  NMT_CHECK(!parts_.empty(), DataError, "no training corpus");
  const int64_t limit = std::numeric_limits<uint32_t>::max();
  offsets_.push_back(0);
  std::vector<CorpusSize> sizes;
  for (const CorpusPart& part : parts_) {
    NMT_CHECK(part.weight > 0 && std::isfinite(part.weight), DataError,
              "corpus {}: weight {} must be a positive number", part.name, part.weight);
    // Before the counts are rounded to integers, which a weight of 1e300 would overflow.
    NMT_CHECK(part.weight * static_cast<double>(part.cache.size()) < static_cast<double>(limit),
              DataError, "corpus {}: weight {} x {} pairs is {:.0f} pairs an epoch; at most "
              "2^32 - 1 are supported", part.name, part.weight, part.cache.size(),
              part.weight * static_cast<double>(part.cache.size()));
    offsets_.push_back(offsets_.back() + part.cache.size());
    sizes.push_back({part.cache.size(), part.weight});
  }
  drawn_ = drawn_per_epoch(sizes, temperature);
  int64_t drawn = 0;
  for (int64_t count : drawn_) drawn += count;
  NMT_CHECK(size() < limit && drawn < limit, DataError,
            "{}: {} pairs, {} drawn an epoch; at most 2^32 - 1 are supported", describe(), size(),
            drawn);
}

CorpusSet::CorpusSet(const TokenCache& cache) : CorpusSet(std::vector<CorpusPart>{{"train", 1.0, cache}}) {}

size_t CorpusSet::part_of(int64_t id) const {
  const auto it = std::upper_bound(offsets_.begin(), offsets_.end(), id);
  return static_cast<size_t>(it - offsets_.begin()) - 1;
}

std::string CorpusSet::describe() const {
  if (parts_.size() == 1) return parts_[0].cache.path().string();
  std::string names;
  for (const CorpusPart& part : parts_) names += (names.empty() ? "" : ", ") + part.name;
  return fmt::format("{} corpora ({})", parts_.size(), names);
}

std::vector<uint32_t> CorpusSet::draw(int64_t epoch, uint64_t seed) const {
  std::vector<uint32_t> ids;
  for (size_t p = 0; p < parts_.size(); ++p) {
    const int64_t n = parts_[p].cache.size();
    const auto first = static_cast<uint32_t>(offsets_[p]);
    const int64_t count = drawn_[p];
    const int64_t whole = n > 0 ? count / n : 0;
    for (int64_t copy = 0; copy < whole; ++copy)
      for (int64_t i = 0; i < n; ++i) ids.push_back(first + static_cast<uint32_t>(i));
    const int64_t rest = count - whole * n;
    if (rest == 0) continue;
    // The rest: the pairs with the smallest hashes of (seed, epoch, corpus, pair).
    const uint64_t stream =
        splitmix64(splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(epoch)) ^ (p + 1));
    std::vector<std::pair<uint64_t, uint32_t>> keys(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      keys[static_cast<size_t>(i)] = {splitmix64(stream ^ static_cast<uint64_t>(i)),
                                      static_cast<uint32_t>(i)};
    std::nth_element(keys.begin(), keys.begin() + rest, keys.end());
    std::vector<uint32_t> chosen;
    chosen.reserve(static_cast<size_t>(rest));
    for (int64_t k = 0; k < rest; ++k) chosen.push_back(keys[static_cast<size_t>(k)].second);
    std::sort(chosen.begin(), chosen.end());
    for (uint32_t i : chosen) ids.push_back(first + i);
  }
  return ids;
}

std::vector<CorpusDraw> CorpusSet::draws() const {
  std::vector<CorpusDraw> out;
  for (size_t p = 0; p < parts_.size(); ++p)
    out.push_back({parts_[p].name, parts_[p].cache.size(), parts_[p].weight, drawn_[p]});
  return out;
}

std::vector<CorpusOptions> training_corpora(const DataOptions& options) {
  if (!options.train.empty()) return options.train;
  return {CorpusOptions{"train", options.train_src, options.train_tgt, 1.0}};
}

std::vector<CorpusOptions> validation_sets(const DataOptions& options) {
  if (!options.valid.empty()) return options.valid;
  if (options.valid_src.empty()) return {};
  return {CorpusOptions{"valid", options.valid_src, options.valid_tgt, 1.0}};
}

}  // namespace nmt::data
