#include "decode/search.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include <ATen/ATen.h>

#include "decode/beam_candidates.h"
#include "decode/sampling.h"
#include "decode/search_steps.h"
#include "util/error.h"

namespace nmt::decode {
namespace {

/// (log-probability, token) [R] of each live row's next token: the best one, or with
/// options.sampling one drawn for its sentence (sentences[live[r]], or live[r] when empty).
std::tuple<at::Tensor, at::Tensor> next_tokens(const at::Tensor& lprobs,
                                               const SearchOptions& options,
                                               const std::vector<int64_t>& live,
                                               const std::vector<int64_t>& sentences,
                                               int64_t step) {
  if (!options.sampling) return best_tokens(lprobs);
  std::vector<int64_t> row_sentence(live.size());
  for (size_t r = 0; r < live.size(); ++r)
    row_sentence[r] = sentences.empty() ? live[r] : sentences[live[r]];
  const at::Tensor tokens = sample_tokens(lprobs, *options.sampling, row_sentence, step);
  return {lprobs.gather(1, tokens.unsqueeze(1)).squeeze(1), tokens};
}

}  // namespace

void validate(const SearchOptions& o) {
  NMT_CHECK(o.beam >= 1, ConfigError, "beam: expected an integer >= 1, found {}", o.beam);
  NMT_CHECK(o.nbest >= 1 && o.nbest <= o.beam, ConfigError,
            "nbest: expected an integer in [1, beam = {}], found {}", o.beam, o.nbest);
  NMT_CHECK(std::isfinite(o.length_penalty), ConfigError,
            "length_penalty: expected a finite number, found {}", o.length_penalty);
  NMT_CHECK(std::isfinite(o.max_len_a) && o.max_len_a >= 0, ConfigError,
            "max_len_a: expected a number >= 0, found {}", o.max_len_a);
  NMT_CHECK(o.max_len_b >= 0, ConfigError, "max_len_b: expected an integer >= 0, found {}",
            o.max_len_b);
  NMT_CHECK(o.max_len_a > 0 || o.max_len_b > 0, ConfigError,
            "max_len_a and max_len_b are both 0: every output would be empty");
  if (!o.sampling) return;
  NMT_CHECK(o.beam == 1 && o.nbest == 1, ConfigError,
            "sampling draws one output per sentence: expected beam 1 and nbest 1, found beam {} "
            "and nbest {}",
            o.beam, o.nbest);
  NMT_CHECK(o.sampling->top_k >= 0, ConfigError,
            "sampling top_k: expected an integer >= 1 (or 0: the whole vocabulary), found {}",
            o.sampling->top_k);
  NMT_CHECK(o.sampling->temperature >= kMinSamplingTemperature &&
                o.sampling->temperature <= kMaxSamplingTemperature,
            ConfigError, "sampling temperature: expected a number in [{}, {}], found {}",
            kMinSamplingTemperature, kMaxSamplingTemperature, o.sampling->temperature);
}

double length_penalty(int64_t length, double alpha) {
  return std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

int64_t max_output_length(int64_t src_len, const SearchOptions& options, int64_t max_positions) {
  const double limit =
      std::floor(options.max_len_a * static_cast<double>(src_len)) + double(options.max_len_b);
  return std::max<int64_t>(0, std::min<int64_t>(static_cast<int64_t>(limit), max_positions - 1));
}

std::vector<std::vector<Hypothesis>> search(const Ensemble& models, const at::Tensor& src_ids,
                                            const SearchIds& ids, const SearchOptions& options,
                                            const std::vector<int64_t>& sentences) {
  return options.beam == 1 ? greedy_search(models, src_ids, ids, options, sentences)
                           : beam_search(models, src_ids, ids, options);
}

std::vector<std::vector<Hypothesis>> greedy_search(const Ensemble& models,
                                                   const at::Tensor& src_ids, const SearchIds& ids,
                                                   const SearchOptions& options,
                                                   const std::vector<int64_t>& sentences) {
  check_input(src_ids, ids, options);
  TORCH_CHECK(sentences.empty() || static_cast<int64_t>(sentences.size()) == src_ids.size(0),
              "greedy_search: ", src_ids.size(0), " sources but ", sentences.size(),
              " sentence ids");
  c10::InferenceMode inference;
  const int64_t batch = src_ids.size(0);
  const at::Device device = src_ids.device();
  const std::vector<int64_t> limit =
      output_limits(src_ids, ids.pad, options, models.max_positions());
  std::vector<Hypothesis> best(batch);
  if (batch == 0) return {};

  Stepper stepper(models, src_ids, options.cached);
  std::vector<int64_t> live(batch);  // sentence of each row
  for (int64_t i = 0; i < batch; ++i) live[i] = i;
  at::Tensor last =
      at::full({batch}, ids.start, at::TensorOptions().dtype(at::kLong).device(device));
  // Without scores, the best token of the logits is that of the log-probabilities.
  const bool logits_only = !options.scores && !options.sampling && stepper.steps_logits();
  for (int64_t step = 0; !live.empty(); ++step) {
    at::Tensor lprobs = stepper.step(last, /*normalized=*/!logits_only);
    std::vector<int64_t> row_limit(live.size());
    for (size_t r = 0; r < live.size(); ++r) row_limit[r] = limit[live[r]];
    constrain(lprobs, ids, row_limit, step);
    auto [values, tokens] = next_tokens(lprobs, options, live, sentences, step);
    const at::Tensor values_cpu = values.to(at::kCPU).contiguous();
    const at::Tensor tokens_cpu = tokens.to(at::kCPU).contiguous();
    const float* value = values_cpu.data_ptr<float>();
    const int64_t* token = tokens_cpu.data_ptr<int64_t>();
    std::vector<bool> kept(live.size());
    for (size_t r = 0; r < live.size(); ++r) {
      Hypothesis& h = best[live[r]];
      h.score += value[r];
      if (token[r] == ids.eos) continue;
      h.tokens.push_back(static_cast<int32_t>(token[r]));
      kept[r] = true;
    }
    const std::vector<int64_t> keep = rows_kept_in_place(kept);
    if (keep.empty()) break;
    if (keep.size() != live.size()) {
      const at::Tensor order = long_tensor(keep, device);
      stepper.reorder(order, order);
      last = tokens.index_select(0, order);
      std::vector<int64_t> next_live(keep.size());
      for (size_t r = 0; r < keep.size(); ++r) next_live[r] = live[keep[r]];
      live = std::move(next_live);
    } else {
      last = tokens;
    }
  }
  std::vector<std::vector<Hypothesis>> out(batch);
  for (int64_t i = 0; i < batch; ++i) {
    Hypothesis& h = best[i];
    if (logits_only) h.score = std::numeric_limits<double>::quiet_NaN();
    h.normalized_score =
        h.score / length_penalty(static_cast<int64_t>(h.tokens.size()) + 1, options.length_penalty);
    out[i].push_back(std::move(h));
  }
  return out;
}

}  // namespace nmt::decode
