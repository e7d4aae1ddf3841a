#pragma once
// Internal to eval/: exact n-gram counting without strings or node-based maps. An n-gram is
// packed into a 128-bit key (BLEU: up to four 32-bit word ids; chrF: up to six 21-bit code
// points), per-sentence counts are sorted (key, count) runs, and clipping is a merge.

#include <cstdint>
#include <string_view>
#include <vector>

namespace nmt::eval::detail {

/// One n-gram of a known order, packed.
struct NgramKey {
  uint64_t hi = 0;  ///< first slots
  uint64_t lo = 0;  ///< last slots
  bool operator<(const NgramKey& o) const { return hi != o.hi ? hi < o.hi : lo < o.lo; }
  bool operator==(const NgramKey& o) const { return hi == o.hi && lo == o.lo; }
};

/// A distinct n-gram and how often it occurs.
struct NgramCount {
  NgramKey key;
  int64_t count = 0;
};

/// Packs the n-gram values[0..n) (n <= 4, 32-bit values) into a key.
inline NgramKey pack32(const uint32_t* values, int n) {
  uint64_t slots[4] = {0, 0, 0, 0};
  for (int i = 0; i < n; ++i) slots[i] = values[i];
  return {(slots[0] << 32) | slots[1], (slots[2] << 32) | slots[3]};
}

/// Packs the n-gram values[0..n) (n <= 6, values < 2^21, e.g. code points) into a key.
inline NgramKey pack21(const uint32_t* values, int n) {
  uint64_t slots[6] = {0, 0, 0, 0, 0, 0};
  for (int i = 0; i < n; ++i) slots[i] = values[i];
  return {(slots[0] << 42) | (slots[1] << 21) | slots[2],
          (slots[3] << 42) | (slots[4] << 21) | slots[5]};
}

/// Sorts keys and writes each distinct key with its count to out (sorted by key).
void count_keys(std::vector<NgramKey>& keys, std::vector<NgramCount>& out);

/// Collapses a list of counts that may repeat keys (several references) into sorted distinct
/// keys, each with its largest count: the clipping bound of BLEU with several references.
void merge_max(std::vector<NgramCount>& counts);

/// Sum of the counts.
int64_t total_count(const std::vector<NgramCount>& counts);

/// Sum over the hypothesis n-grams of min(hypothesis count, reference count); both sorted.
int64_t clipped_matches(const std::vector<NgramCount>& hyp, const std::vector<NgramCount>& ref);

/// Maps the distinct words of one segment to dense ids 0, 1, ... (open addressing; the views
/// must outlive the interner's use until the next reset).
class WordInterner {
 public:
  /// Forgets all words and makes room for up to `words` distinct ones.
  void reset(size_t words);
  /// The id of word, assigning the next free one on first sight.
  uint32_t id(std::string_view word);

 private:
  void grow();
  struct Slot {
    std::string_view word;
    uint64_t hash = 0;
    uint32_t id = 0;
    bool used = false;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  uint32_t next_ = 0;
};

}  // namespace nmt::eval::detail
