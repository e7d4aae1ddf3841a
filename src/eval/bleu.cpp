#include "eval/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "eval/ngram_counts.h"
#include "eval/tokenizer.h"
#include "eval/unicode.h"
#include "util/error.h"

namespace nmt::eval {
namespace {

constexpr int kMaxOrder = 4;

/// Splits tokenized text (single spaces, no padding) into tokens.
void split_tokens(std::string_view text, std::vector<std::string_view>& tokens) {
  tokens.clear();
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    tokens.push_back(text.substr(start, end - start));
    start = end + 1;
  }
}

/// sacrebleu's my_log: log, with log(0) floored to -9999999999.
double my_log(double x) { return x == 0.0 ? -9999999999.0 : std::log(x); }

/// Per-corpus scratch space, so that sentences cost no allocations once warmed up.
class BleuCounter {
 public:
  explicit BleuCounter(size_t nrefs) : ref_text_(nrefs), ref_ids_(nrefs) {}

  void add_segment(std::string_view hyp, const std::vector<const std::string*>& refs,
                   BleuStats& stats) {
    tokenizer_.tokenize(rstrip(hyp), hyp_text_);
    split_tokens(hyp_text_, words_);
    size_t words = words_.size();
    for (size_t r = 0; r < refs.size(); ++r) {
      tokenizer_.tokenize(rstrip(*refs[r]), ref_text_[r]);
      words += static_cast<size_t>(std::count(ref_text_[r].begin(), ref_text_[r].end(), ' ')) + 1;
    }
    interner_.reset(words);
    to_ids(words_, hyp_ids_);
    for (size_t r = 0; r < refs.size(); ++r) {
      split_tokens(ref_text_[r], words_);
      to_ids(words_, ref_ids_[r]);
    }

    // Reference n-grams: the largest count over the references clips the matches.
    for (int n = 1; n <= kMaxOrder; ++n) {
      ref_counts_[n - 1].clear();
      for (size_t r = 0; r < refs.size(); ++r) {
        count_ngrams(ref_ids_[r], n, counts_);
        ref_counts_[n - 1].insert(ref_counts_[n - 1].end(), counts_.begin(), counts_.end());
      }
      if (refs.size() > 1) detail::merge_max(ref_counts_[n - 1]);
    }
    const auto hyp_len = static_cast<int64_t>(hyp_ids_.size());
    for (int n = 1; n <= kMaxOrder; ++n) {
      count_ngrams(hyp_ids_, n, counts_);
      stats.totals[n - 1] += detail::total_count(counts_);
      stats.counts[n - 1] += detail::clipped_matches(counts_, ref_counts_[n - 1]);
    }
    // The closest reference length; the shorter one on ties (BLEU._get_closest_ref_len).
    int64_t closest_diff = -1, closest_len = -1;
    for (size_t r = 0; r < refs.size(); ++r) {
      const auto ref_len = static_cast<int64_t>(ref_ids_[r].size());
      const int64_t diff = std::llabs(hyp_len - ref_len);
      if (closest_diff == -1 || diff < closest_diff) {
        closest_diff = diff;
        closest_len = ref_len;
      } else if (diff == closest_diff && ref_len < closest_len) {
        closest_len = ref_len;
      }
    }
    stats.sys_len += hyp_len;
    stats.ref_len += closest_len;
  }

 private:
  void to_ids(const std::vector<std::string_view>& words, std::vector<uint32_t>& ids) {
    ids.clear();
    for (std::string_view w : words) ids.push_back(interner_.id(w));
  }
  void count_ngrams(const std::vector<uint32_t>& ids, int n, std::vector<detail::NgramCount>& out) {
    keys_.clear();
    for (size_t i = 0; i + n <= ids.size(); ++i) keys_.push_back(detail::pack32(&ids[i], n));
    detail::count_keys(keys_, out);
  }

  Tokenizer13a tokenizer_;
  std::string hyp_text_;
  std::vector<std::string> ref_text_;
  std::vector<std::string_view> words_;
  detail::WordInterner interner_;
  std::vector<uint32_t> hyp_ids_;
  std::vector<std::vector<uint32_t>> ref_ids_;
  std::vector<detail::NgramKey> keys_;
  std::vector<detail::NgramCount> counts_;
  std::array<std::vector<detail::NgramCount>, kMaxOrder> ref_counts_;
};

}  // namespace

BleuStats& BleuStats::operator+=(const BleuStats& other) {
  sys_len += other.sys_len;
  ref_len += other.ref_len;
  for (int n = 0; n < kMaxOrder; ++n) {
    counts[n] += other.counts[n];
    totals[n] += other.totals[n];
  }
  return *this;
}

BleuStats bleu_stats(const std::vector<std::string>& hyps,
                     const std::vector<std::vector<std::string>>& refs) {
  NMT_CHECK(!refs.empty(), DataError, "BLEU needs at least one reference stream, found none");
  for (size_t k = 0; k < refs.size(); ++k) {
    NMT_CHECK(refs[k].size() == hyps.size(), DataError,
              "BLEU: reference stream {} has {} lines, expected {} (one per hypothesis)", k + 1,
              refs[k].size(), hyps.size());
  }
  BleuStats stats;
  stats.nrefs = static_cast<int>(refs.size());
  BleuCounter counter(refs.size());
  std::vector<const std::string*> segment_refs(refs.size());
  for (size_t i = 0; i < hyps.size(); ++i) {
    for (size_t k = 0; k < refs.size(); ++k) segment_refs[k] = &refs[k][i];
    counter.add_segment(hyps[i], segment_refs, stats);
  }
  return stats;
}

BleuResult compute_bleu(const BleuStats& stats) {
  BleuResult r;
  r.sys_len = stats.sys_len;
  r.ref_len = stats.ref_len;
  r.counts = stats.counts;
  r.totals = stats.totals;
  r.signature = bleu_signature(stats.nrefs);
  r.ratio = r.ref_len ? static_cast<double>(r.sys_len) / static_cast<double>(r.ref_len) : 0.0;
  r.bp = 1.0;
  if (r.sys_len < r.ref_len) {
    r.bp = r.sys_len > 0
               ? std::exp(1.0 - static_cast<double>(r.ref_len) / static_cast<double>(r.sys_len))
               : 0.0;
  }
  bool any_match = false;
  for (int64_t c : r.counts) any_match = any_match || c != 0;
  if (!any_match) return r;  // score 0, precisions 0 (sacrebleu's early stop, #141)
  double smooth_mteval = 1.0;
  for (int n = 0; n < kMaxOrder; ++n) {
    if (r.totals[n] == 0) break;
    if (r.counts[n] == 0) {
      smooth_mteval *= 2;  // 'exp' smoothing
      r.precisions[n] = 100.0 / (smooth_mteval * static_cast<double>(r.totals[n]));
    } else {
      r.precisions[n] = 100.0 * static_cast<double>(r.counts[n]) / static_cast<double>(r.totals[n]);
    }
  }
  double log_sum = 0.0;
  for (double p : r.precisions) log_sum += my_log(p);
  r.score = r.bp * std::exp(log_sum / kMaxOrder);
  return r;
}

BleuResult corpus_bleu(const std::vector<std::string>& hyps,
                       const std::vector<std::vector<std::string>>& refs) {
  return compute_bleu(bleu_stats(hyps, refs));
}

std::string bleu_signature(int nrefs) {
  return fmt::format("nrefs:{}|case:mixed|eff:no|tok:13a|smooth:exp|version:{}", nrefs,
                     kSacrebleuVersion);
}

MetricScore to_metric_score(const BleuResult& r) {
  MetricScore s;
  s.name = "BLEU";
  s.score = r.score;
  s.signature = r.signature;
  for (int n = 0; n < kMaxOrder; ++n)
    s.verbose += (n ? "/" : "") + format_fixed(r.precisions[n], 1);
  s.verbose += fmt::format(" (BP = {} ratio = {} hyp_len = {} ref_len = {})", format_fixed(r.bp, 3),
                           format_fixed(r.ratio, 3), r.sys_len, r.ref_len);
  return s;
}

std::string format_bleu(const BleuResult& result, int width, bool with_signature) {
  return format_text(to_metric_score(result), width, with_signature);
}

}  // namespace nmt::eval
