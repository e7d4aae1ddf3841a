#include "decode/forced_scores.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <numeric>

#include "amp/autocast.h"
#include "util/error.h"

namespace nmt::decode {
namespace {

/// The longer side of pair i (the target counted with EOS and the decoder start).
size_t pair_width(const std::vector<std::vector<int64_t>>& sources,
                  const std::vector<std::vector<int64_t>>& targets, size_t i) {
  return std::max(sources[i].size(), targets[i].size() + 1);
}

/// Sums of log p(target + EOS | source) of the pairs order[begin, end): the weighted mean of
/// the models' sums for an ensemble.
std::vector<double> score_batch(const Ensemble& models, const ForcedIds& ids,
                                const std::vector<std::vector<int64_t>>& sources,
                                const std::vector<std::vector<int64_t>>& targets,
                                const std::vector<size_t>& order, size_t begin, size_t end,
                                const ForcedScoreOptions& options) {
  const int64_t rows = static_cast<int64_t>(end - begin);
  size_t src_width = 0, tgt_width = 0;
  for (size_t k = begin; k < end; ++k) {
    src_width = std::max(src_width, sources[order[k]].size());
    tgt_width = std::max(tgt_width, targets[order[k]].size() + 1);
  }
  const auto s = static_cast<int64_t>(src_width), t = static_cast<int64_t>(tgt_width);
  at::Tensor src = at::full({rows, s}, ids.pad, at::kLong);
  at::Tensor tgt_in = at::full({rows, t}, ids.pad, at::kLong);
  at::Tensor tgt_out = at::full({rows, t}, ids.pad, at::kLong);
  at::Tensor mask = at::zeros({rows, t}, at::kBool);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<int64_t>& source = sources[order[begin + r]];
    const std::vector<int64_t>& target = targets[order[begin + r]];
    std::copy(source.begin(), source.end(), src.data_ptr<int64_t>() + r * s);
    int64_t* in = tgt_in.data_ptr<int64_t>() + r * t;
    int64_t* out = tgt_out.data_ptr<int64_t>() + r * t;
    in[0] = ids.decoder_start;
    std::copy(target.begin(), target.end(), in + 1);
    std::copy(target.begin(), target.end(), out);
    out[target.size()] = ids.eos;
    mask[r].slice(0, 0, static_cast<int64_t>(target.size()) + 1).fill_(true);
  }
  src = src.to(options.device);
  tgt_in = tgt_in.to(options.device);
  tgt_out = tgt_out.to(options.device).unsqueeze(-1);
  mask = mask.to(options.device);
  at::Tensor sums;
  for (size_t m = 0; m < models.size(); ++m) {
    at::Tensor logits;
    {
      amp::AutocastScope autocast(options.amp, options.device.type());
      logits = models.model(m).forward(src, tgt_in);
    }
    const at::Tensor picked =
        logits.to(at::kFloat).log_softmax(-1).gather(-1, tgt_out).squeeze(-1).to(at::kDouble);
    const at::Tensor model_sums = picked.masked_fill(~mask, 0.0).sum(1);
    if (models.size() == 1)
      sums = model_sums;
    else if (m == 0)
      sums = model_sums.mul_(models.weight(0));
    else
      sums.add_(model_sums, models.weight(m));
  }
  sums = sums.cpu();
  return std::vector<double>(sums.data_ptr<double>(), sums.data_ptr<double>() + rows);
}

}  // namespace

std::vector<PairScore> forced_scores(const Ensemble& models, const ForcedIds& ids,
                                     const std::vector<std::vector<int64_t>>& sources,
                                     const std::vector<std::vector<int64_t>>& targets,
                                     const ForcedScoreOptions& options,
                                     const std::function<void(int64_t)>& on_batch) {
  NMT_CHECK(sources.size() == targets.size(), DataError, "forced scores: {} sources but {} targets",
            sources.size(), targets.size());
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Length-sorted batches waste little padding; results go back to their input positions.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return pair_width(sources, targets, a) < pair_width(sources, targets, b);
  });
  std::vector<PairScore> out(sources.size());
  c10::InferenceMode guard;
  size_t begin = 0;
  while (begin < order.size()) {
    size_t end = begin + 1;
    while (end < order.size() &&
           static_cast<int64_t>((end - begin + 1) * pair_width(sources, targets, order[end])) <=
               options.max_tokens)
      ++end;
    const std::vector<double> sums =
        score_batch(models, ids, sources, targets, order, begin, end, options);
    for (size_t k = begin; k < end; ++k)
      out[order[k]] = {sums[k - begin], static_cast<int64_t>(targets[order[k]].size()) + 1};
    if (on_batch) on_batch(static_cast<int64_t>(end));
    begin = end;
  }
  return out;
}

}  // namespace nmt::decode
