#include "decode/batch_search.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <utility>

#include <ATen/ATen.h>

#include "amp/autocast.h"

namespace nmt::decode {
namespace {

/// Searches the sources order[begin, end) as one batch, right-padded.
std::vector<std::vector<Hypothesis>> search_batch(const Ensemble& models, const SearchIds& ids,
                                                  const std::vector<std::vector<int64_t>>& sources,
                                                  const std::vector<size_t>& order, size_t begin,
                                                  size_t end, int64_t first_line,
                                                  const BatchSearchOptions& options) {
  const int64_t rows = static_cast<int64_t>(end - begin);
  std::vector<int64_t> sentences(rows);
  for (size_t k = begin; k < end; ++k)
    sentences[k - begin] = first_line + static_cast<int64_t>(order[k]);
  size_t width = 0;
  for (size_t k = begin; k < end; ++k) width = std::max(width, sources[order[k]].size());
  at::Tensor src = at::full({rows, static_cast<int64_t>(width)}, options.pad, at::kLong);
  int64_t* data = src.data_ptr<int64_t>();
  for (size_t k = begin; k < end; ++k) {
    const std::vector<int64_t>& s = sources[order[k]];
    std::copy(s.begin(), s.end(), data + (k - begin) * width);
  }
  src = src.to(options.device);
  amp::AutocastScope autocast(options.amp, options.device.type());
  return search(models, src, ids, options.search, sentences);
}

}  // namespace

std::vector<std::vector<Hypothesis>> search_batches(
    const Ensemble& models, const SearchIds& ids, const std::vector<std::vector<int64_t>>& sources,
    int64_t first_line, const BatchSearchOptions& options,
    const std::function<void(int64_t)>& on_batch) {
  std::vector<std::vector<Hypothesis>> out(sources.size());
  std::vector<size_t> order;
  int64_t done = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].empty())
      ++done;
    else
      order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sources[a].size() < sources[b].size(); });
  c10::InferenceMode guard;
  size_t begin = 0;
  while (begin < order.size()) {
    size_t end = begin + 1;
    while (end < order.size() &&
           static_cast<int64_t>((end - begin + 1) * sources[order[end]].size()) <=
               options.max_tokens)
      ++end;
    std::vector<std::vector<Hypothesis>> hyps =
        search_batch(models, ids, sources, order, begin, end, first_line, options);
    for (size_t k = begin; k < end; ++k) out[order[k]] = std::move(hyps[k - begin]);
    done += static_cast<int64_t>(end - begin);
    if (on_batch) on_batch(done);
    begin = end;
  }
  return out;
}

}  // namespace nmt::decode
