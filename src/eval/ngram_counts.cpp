#include "eval/ngram_counts.h"

#include <algorithm>

namespace nmt::eval::detail {

void count_keys(std::vector<NgramKey>& keys, std::vector<NgramCount>& out) {
  out.clear();
  std::sort(keys.begin(), keys.end());
  for (const NgramKey& key : keys) {
    if (!out.empty() && out.back().key == key)
      ++out.back().count;
    else
      out.push_back({key, 1});
  }
}

void merge_max(std::vector<NgramCount>& counts) {
  std::sort(counts.begin(), counts.end(),
            [](const NgramCount& a, const NgramCount& b) { return a.key < b.key; });
  size_t kept = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (kept > 0 && counts[kept - 1].key == counts[i].key)
      counts[kept - 1].count = std::max(counts[kept - 1].count, counts[i].count);
    else
      counts[kept++] = counts[i];
  }
  counts.resize(kept);
}

int64_t total_count(const std::vector<NgramCount>& counts) {
  int64_t total = 0;
  for (const NgramCount& c : counts) total += c.count;
  return total;
}

int64_t clipped_matches(const std::vector<NgramCount>& hyp, const std::vector<NgramCount>& ref) {
  int64_t matches = 0;
  size_t j = 0;
  for (const NgramCount& h : hyp) {
    while (j < ref.size() && ref[j].key < h.key) ++j;
    if (j == ref.size()) break;
    if (ref[j].key == h.key) matches += std::min(h.count, ref[j].count);
  }
  return matches;
}

void WordInterner::reset(size_t words) {
  size_t capacity = 16;
  while (capacity < 2 * words) capacity *= 2;
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  next_ = 0;
}

void WordInterner::grow() {
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(old.size() * 2, Slot{});
  mask_ = slots_.size() - 1;
  for (const Slot& slot : old) {
    if (!slot.used) continue;
    size_t i = slot.hash & mask_;
    while (slots_[i].used) i = (i + 1) & mask_;
    slots_[i] = slot;
  }
}

uint32_t WordInterner::id(std::string_view word) {
  if (slots_.empty()) reset(0);
  if (2 * (static_cast<size_t>(next_) + 1) > slots_.size()) grow();  // keep it at most half full
  uint64_t hash = 1469598103934665603ull;                            // FNV-1a
  for (char c : word) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
    Slot& slot = slots_[i];
    if (!slot.used) {
      slot = {word, hash, next_, true};
      return next_++;
    }
    if (slot.hash == hash && slot.word == word) return slot.id;
  }
}

}  // namespace nmt::eval::detail
