#include "eval/chrf.h"

#include <array>

#include <fmt/format.h>

#include "eval/ngram_counts.h"
#include "eval/unicode.h"
#include "util/error.h"

namespace nmt::eval {
namespace {

constexpr int kCharOrder = 6;
constexpr int kBeta = 2;

/// chrF's punctuation set (Python's string.punctuation).
bool is_punct(char c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
         (c >= '{' && c <= '~');
}

/// The F-beta score of per-order [hyp, ref, match] statistics (CHRF._compute_f_score with
/// eps_smoothing=False): precision and recall averaged over the orders where both the
/// hypothesis and the reference have n-grams.
double f_score(const int64_t* stats, int orders) {
  constexpr double kEps = 1e-16;
  const double factor = kBeta * kBeta;
  double avg_prec = 0.0, avg_rec = 0.0;
  int effective_order = 0;
  for (int i = 0; i < orders; ++i) {
    const int64_t n_hyp = stats[3 * i], n_ref = stats[3 * i + 1], n_match = stats[3 * i + 2];
    const double prec =
        n_hyp > 0 ? static_cast<double>(n_match) / static_cast<double>(n_hyp) : kEps;
    const double rec = n_ref > 0 ? static_cast<double>(n_match) / static_cast<double>(n_ref) : kEps;
    if (n_hyp > 0 && n_ref > 0) {
      avg_prec += prec;
      avg_rec += rec;
      ++effective_order;
    }
  }
  if (effective_order == 0) {
    avg_prec = avg_rec = 0.0;
  } else {
    avg_prec /= effective_order;
    avg_rec /= effective_order;
  }
  if (avg_prec + avg_rec == 0.0) return 0.0;
  double score = (1 + factor) * avg_prec * avg_rec;
  score /= (factor * avg_prec) + avg_rec;
  return 100 * score;
}

/// One side's n-gram counts per order (char orders, then word orders).
using OrderCounts = std::vector<std::vector<detail::NgramCount>>;

/// Per-corpus scratch space, so that sentences cost no allocations once warmed up.
class ChrfCounter {
 public:
  ChrfCounter(size_t nrefs, int word_order)
      : word_order_(word_order),
        orders_(kCharOrder + word_order),
        hyp_(orders_),
        ref_(orders_),
        ref_words_(nrefs),
        stats_(3 * orders_),
        best_(3 * orders_) {}

  /// Adds the statistics of the best reference of this segment to corpus.
  void add_segment(std::string_view hyp, const std::vector<const std::string*>& refs,
                   std::vector<int64_t>& corpus) {
    if (word_order_ > 0) {  // intern the words of the whole segment first
      size_t words = words_of(hyp, hyp_words_);
      for (size_t r = 0; r < refs.size(); ++r) words += words_of(*refs[r], ref_words_[r]);
      interner_.reset(words);
    }
    count_side(hyp, hyp_words_, hyp_);
    double best_f = -1.0;
    for (size_t r = 0; r < refs.size(); ++r) {
      count_side(*refs[r], ref_words_[r], ref_);
      for (int i = 0; i < orders_; ++i) {
        const int64_t ref_total = detail::total_count(ref_[i]);
        // Hypothesis n-grams count only where the reference has n-grams of that order.
        stats_[3 * i] = ref_[i].empty() ? 0 : detail::total_count(hyp_[i]);
        stats_[3 * i + 1] = ref_total;
        stats_[3 * i + 2] = detail::clipped_matches(hyp_[i], ref_[i]);
      }
      const double f = f_score(stats_.data(), orders_);
      if (f > best_f) {
        best_f = f;
        best_.swap(stats_);
      }
    }
    for (size_t j = 0; j < best_.size(); ++j) corpus[j] += best_[j];
  }

 private:
  /// Splits text into chrF++ words (CHRF._remove_punctuation) and returns how many.
  size_t words_of(std::string_view text, std::vector<std::string_view>& words) {
    split_.clear();
    split_words(text, split_);
    words.clear();
    for (std::string_view w : split_) {
      size_t first_len = 0;
      next_code_point(w, first_len);
      if (first_len == w.size()) {  // one character
        words.push_back(w);
      } else if (is_punct(w.back())) {
        words.push_back(w.substr(0, w.size() - 1));
        words.push_back(w.substr(w.size() - 1));
      } else if (is_punct(w.front())) {
        words.push_back(w.substr(0, 1));
        words.push_back(w.substr(1));
      } else {
        words.push_back(w);
      }
    }
    return words.size();
  }

  void count_side(std::string_view text, const std::vector<std::string_view>& words,
                  OrderCounts& out) {
    code_points_.clear();
    for (size_t pos = 0; pos < text.size();) {
      const uint32_t cp = next_code_point(text, pos);
      if (!is_python_space(cp)) code_points_.push_back(cp);
    }
    for (int n = 1; n <= kCharOrder; ++n) {
      keys_.clear();
      for (size_t i = 0; i + n <= code_points_.size(); ++i)
        keys_.push_back(detail::pack21(&code_points_[i], n));
      detail::count_keys(keys_, out[n - 1]);
    }
    if (word_order_ == 0) return;
    ids_.clear();
    for (std::string_view w : words) ids_.push_back(interner_.id(w));
    for (int n = 1; n <= word_order_; ++n) {
      keys_.clear();
      for (size_t i = 0; i + n <= ids_.size(); ++i) keys_.push_back(detail::pack32(&ids_[i], n));
      detail::count_keys(keys_, out[kCharOrder + n - 1]);
    }
  }

  int word_order_;
  int orders_;
  OrderCounts hyp_, ref_;
  std::vector<std::string_view> split_, hyp_words_;
  std::vector<std::vector<std::string_view>> ref_words_;
  detail::WordInterner interner_;
  std::vector<uint32_t> code_points_, ids_;
  std::vector<detail::NgramKey> keys_;
  std::vector<int64_t> stats_, best_;
};

}  // namespace

ChrfStats& ChrfStats::operator+=(const ChrfStats& other) {
  if (stats.empty()) return *this = other;
  NMT_CHECK(stats.size() == other.stats.size(), Error,
            "chrF: cannot add statistics of word order {} to word order {}", other.word_order,
            word_order);
  for (size_t i = 0; i < stats.size(); ++i) stats[i] += other.stats[i];
  return *this;
}

ChrfStats chrf_stats(const std::vector<std::string>& hyps,
                     const std::vector<std::vector<std::string>>& refs, int word_order) {
  NMT_CHECK(word_order >= 0 && word_order <= 4, Error, "chrF: word order must be 0-4, found {}",
            word_order);
  NMT_CHECK(!refs.empty(), DataError, "chrF needs at least one reference stream, found none");
  for (size_t k = 0; k < refs.size(); ++k) {
    NMT_CHECK(refs[k].size() == hyps.size(), DataError,
              "chrF: reference stream {} has {} lines, expected {} (one per hypothesis)", k + 1,
              refs[k].size(), hyps.size());
  }
  ChrfStats stats;
  stats.word_order = word_order;
  stats.nrefs = static_cast<int>(refs.size());
  stats.stats.assign(3 * (kCharOrder + word_order), 0);
  ChrfCounter counter(refs.size(), word_order);
  std::vector<const std::string*> segment_refs(refs.size());
  for (size_t i = 0; i < hyps.size(); ++i) {
    for (size_t k = 0; k < refs.size(); ++k) segment_refs[k] = &refs[k][i];
    counter.add_segment(hyps[i], segment_refs, stats.stats);
  }
  return stats;
}

ChrfResult compute_chrf(const ChrfStats& stats) {
  ChrfResult r;
  r.score = f_score(stats.stats.data(), static_cast<int>(stats.stats.size() / 3));
  r.name = fmt::format("chrF{}{}", kBeta, std::string(stats.word_order, '+'));
  r.signature = chrf_signature(stats.nrefs, stats.word_order);
  return r;
}

ChrfResult corpus_chrf(const std::vector<std::string>& hyps,
                       const std::vector<std::vector<std::string>>& refs, int word_order) {
  return compute_chrf(chrf_stats(hyps, refs, word_order));
}

std::string chrf_signature(int nrefs, int word_order) {
  return fmt::format("nrefs:{}|case:mixed|eff:yes|nc:{}|nw:{}|space:no|version:{}", nrefs,
                     kCharOrder, word_order, kSacrebleuVersion);
}

MetricScore to_metric_score(const ChrfResult& r) { return {r.name, r.score, "", r.signature}; }

std::string format_chrf(const ChrfResult& result, int width, bool with_signature) {
  return format_text(to_metric_score(result), width, with_signature);
}

}  // namespace nmt::eval
