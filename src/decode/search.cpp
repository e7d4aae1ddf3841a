#include "decode/search.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include <ATen/ATen.h>

#include "decode/sampling.h"
#include "util/error.h"

namespace nmt::decode {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// One decoder step for every live row, cached (incremental state) or uncached (the whole
/// prefix again), behind one interface so that both searches run the same code.
class Stepper {
 public:
  Stepper(model::TransformerImpl& model, model::EncoderOutput encoded, bool cached)
      : model_(model), cached_(cached) {
    if (cached_) {
      state_ = model_.init_state(encoded);
    } else {
      encoded_ = std::move(encoded);
      prefix_ = at::empty({encoded_.out.size(0), 0},
                          at::TensorOptions().dtype(at::kLong).device(encoded_.out.device()));
    }
  }

  /// Feeds last_tokens [R] -> float32 log-probabilities [R, V] of the next token.
  at::Tensor step(const at::Tensor& last_tokens) {
    at::Tensor logits;
    if (cached_) {
      logits = model_.decode_step(last_tokens, state_);
    } else {
      prefix_ = at::cat({prefix_, last_tokens.unsqueeze(1)}, 1);
      logits = model_.decode(prefix_, encoded_).select(1, -1);
    }
    return logits.to(at::kFloat).log_softmax(-1);
  }

  /// Keeps rows order [R'] (int64 on the model's device), in that order. With same_sources,
  /// every row keeps the source it had (beams moving within their sentence's block of rows),
  /// so only what depends on the target prefix is gathered, not the encoder side.
  void reorder(const at::Tensor& order, bool same_sources = false) {
    if (cached_ && same_sources) {
      for (model::KeyValue& kv : state_.self_attention) {
        if (kv.key.defined()) kv.key = kv.key.index_select(0, order);
        if (kv.value.defined()) kv.value = kv.value.index_select(0, order);
      }
    } else if (cached_) {
      model_.reorder_state(state_, order);
    } else if (same_sources) {
      prefix_ = prefix_.index_select(0, order);
    } else {
      encoded_.out = encoded_.out.index_select(0, order);
      encoded_.src_pad_mask = encoded_.src_pad_mask.index_select(0, order);
      prefix_ = prefix_.index_select(0, order);
    }
  }

 private:
  model::TransformerImpl& model_;
  bool cached_;
  model::DecoderState state_;     // cached
  model::EncoderOutput encoded_;  // uncached
  at::Tensor prefix_;             // uncached: tokens fed so far [R, t]
};

/// Tokens per source row (non-pad), and each row's output length limit.
std::vector<int64_t> output_limits(const at::Tensor& src_ids, int64_t pad,
                                   const SearchOptions& options, int64_t max_positions) {
  const at::Tensor lengths = src_ids.ne(pad).sum(1).to(at::kCPU, at::kLong).contiguous();
  std::vector<int64_t> limits(lengths.size(0));
  const int64_t* data = lengths.data_ptr<int64_t>();
  for (size_t i = 0; i < limits.size(); ++i)
    limits[i] = max_output_length(data[i], options, max_positions);
  return limits;
}

at::Tensor long_tensor(const std::vector<int64_t>& values, const at::Device& device) {
  return at::tensor(values, at::TensorOptions().dtype(at::kLong)).to(device);
}

/// Bans pad and BOS everywhere, and everything but EOS in rows that reached their limit.
void constrain(at::Tensor& lprobs, const SearchIds& ids, const std::vector<int64_t>& row_limit,
               int64_t step) {
  lprobs.select(1, ids.pad).fill_(kNegInf);
  lprobs.select(1, ids.bos).fill_(kNegInf);
  std::vector<int64_t> forced;
  for (size_t r = 0; r < row_limit.size(); ++r)
    if (step >= row_limit[r]) forced.push_back(static_cast<int64_t>(r));
  if (forced.empty()) return;
  const at::Tensor rows = long_tensor(forced, lprobs.device());
  at::Tensor eos = lprobs.index_select(0, rows).select(1, ids.eos).clone();
  lprobs.index_fill_(0, rows, kNegInf);
  lprobs.select(1, ids.eos).index_copy_(0, rows, eos);
}

/// (log-probability, token) [R] of each live row's next token: the best one, or with
/// options.sampling one drawn for its sentence (sentences[live[r]], or live[r] when empty).
std::tuple<at::Tensor, at::Tensor> next_tokens(const at::Tensor& lprobs,
                                               const SearchOptions& options,
                                               const std::vector<int64_t>& live,
                                               const std::vector<int64_t>& sentences,
                                               int64_t step) {
  if (!options.sampling) return lprobs.max(1);
  std::vector<int64_t> row_sentence(live.size());
  for (size_t r = 0; r < live.size(); ++r)
    row_sentence[r] = sentences.empty() ? live[r] : sentences[live[r]];
  const at::Tensor tokens = sample_tokens(lprobs, *options.sampling, row_sentence, step);
  return {lprobs.gather(1, tokens.unsqueeze(1)).squeeze(1), tokens};
}

void check_input(const model::TransformerImpl& model, const at::Tensor& src_ids,
                 const SearchIds& ids, const SearchOptions& options) {
  validate(options);
  TORCH_CHECK(src_ids.dim() == 2 && src_ids.scalar_type() == at::kLong,
              "search: expected src_ids int64 [B, S], found ", src_ids.scalar_type(), " ",
              src_ids.sizes());
  TORCH_CHECK(ids.bos != ids.eos && ids.pad != ids.eos,
              "search: BOS, EOS and pad must differ (bos ", ids.bos, ", eos ", ids.eos, ", pad ",
              ids.pad, ")");
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

std::vector<std::vector<Hypothesis>> search(model::TransformerImpl& model,
                                            const at::Tensor& src_ids, const SearchIds& ids,
                                            const SearchOptions& options,
                                            const std::vector<int64_t>& sentences) {
  return options.beam == 1 ? greedy_search(model, src_ids, ids, options, sentences)
                           : beam_search(model, src_ids, ids, options);
}

std::vector<std::vector<Hypothesis>> greedy_search(model::TransformerImpl& model,
                                                   const at::Tensor& src_ids, const SearchIds& ids,
                                                   const SearchOptions& options,
                                                   const std::vector<int64_t>& sentences) {
  check_input(model, src_ids, ids, options);
  TORCH_CHECK(sentences.empty() || static_cast<int64_t>(sentences.size()) == src_ids.size(0),
              "greedy_search: ", src_ids.size(0), " sources but ", sentences.size(),
              " sentence ids");
  c10::InferenceMode inference;
  const int64_t batch = src_ids.size(0);
  const at::Device device = src_ids.device();
  const std::vector<int64_t> limit =
      output_limits(src_ids, ids.pad, options, model.options().max_positions);
  std::vector<Hypothesis> best(batch);
  if (batch == 0) return {};

  Stepper stepper(model, model.encode(src_ids), options.cached);
  std::vector<int64_t> live(batch);  // sentence of each row
  for (int64_t i = 0; i < batch; ++i) live[i] = i;
  at::Tensor last = at::full({batch}, ids.bos, at::TensorOptions().dtype(at::kLong).device(device));
  for (int64_t step = 0; !live.empty(); ++step) {
    at::Tensor lprobs = stepper.step(last);
    std::vector<int64_t> row_limit(live.size());
    for (size_t r = 0; r < live.size(); ++r) row_limit[r] = limit[live[r]];
    constrain(lprobs, ids, row_limit, step);
    auto [values, tokens] = next_tokens(lprobs, options, live, sentences, step);
    const at::Tensor values_cpu = values.to(at::kCPU).contiguous();
    const at::Tensor tokens_cpu = tokens.to(at::kCPU).contiguous();
    const float* value = values_cpu.data_ptr<float>();
    const int64_t* token = tokens_cpu.data_ptr<int64_t>();
    std::vector<int64_t> keep;
    std::vector<int64_t> next_live;
    for (size_t r = 0; r < live.size(); ++r) {
      Hypothesis& h = best[live[r]];
      h.score += value[r];
      if (token[r] == ids.eos) continue;
      h.tokens.push_back(static_cast<int32_t>(token[r]));
      keep.push_back(static_cast<int64_t>(r));
      next_live.push_back(live[r]);
    }
    if (next_live.empty()) break;
    if (keep.size() != live.size()) {
      const at::Tensor order = long_tensor(keep, device);
      stepper.reorder(order);
      last = tokens.index_select(0, order);
    } else {
      last = tokens;
    }
    live = std::move(next_live);
  }
  std::vector<std::vector<Hypothesis>> out(batch);
  for (int64_t i = 0; i < batch; ++i) {
    Hypothesis& h = best[i];
    h.normalized_score =
        h.score / length_penalty(static_cast<int64_t>(h.tokens.size()) + 1, options.length_penalty);
    out[i].push_back(std::move(h));
  }
  return out;
}

std::vector<std::vector<Hypothesis>> beam_search(model::TransformerImpl& model,
                                                 const at::Tensor& src_ids, const SearchIds& ids,
                                                 const SearchOptions& options) {
  check_input(model, src_ids, ids, options);
  c10::InferenceMode inference;
  const int64_t batch = src_ids.size(0);
  const int64_t beam = options.beam;
  const at::Device device = src_ids.device();
  const std::vector<int64_t> limit =
      output_limits(src_ids, ids.pad, options, model.options().max_positions);
  if (batch == 0) return {};

  Stepper stepper(model, model.encode(src_ids), options.cached);
  // Rows are sentence-major: row i * beam + k is beam k of the i-th live sentence.
  std::vector<int64_t> live(batch);
  std::vector<int64_t> expand;
  std::vector<float> beam_score;
  for (int64_t i = 0; i < batch; ++i) {
    live[i] = i;
    for (int64_t k = 0; k < beam; ++k) {
      expand.push_back(i);
      // Only beam 0 is live at the start, so the first step's candidates are distinct.
      beam_score.push_back(k == 0 ? 0.0f : -std::numeric_limits<float>::infinity());
    }
  }
  stepper.reorder(long_tensor(expand, device));
  std::vector<std::vector<int32_t>> history(batch * beam);
  std::vector<std::vector<Hypothesis>> finished(batch);
  at::Tensor scores = at::tensor(beam_score).to(device);
  at::Tensor last =
      at::full({batch * beam}, ids.bos, at::TensorOptions().dtype(at::kLong).device(device));

  for (int64_t step = 0; !live.empty(); ++step) {
    const int64_t n = static_cast<int64_t>(live.size());
    at::Tensor lprobs = stepper.step(last);
    const int64_t vocab = lprobs.size(1);
    std::vector<int64_t> row_limit(n * beam);
    for (int64_t r = 0; r < n * beam; ++r) row_limit[r] = limit[live[r / beam]];
    constrain(lprobs, ids, row_limit, step);
    const at::Tensor candidates = (scores.unsqueeze(1) + lprobs).view({n, beam * vocab});
    auto [top_values, top_index] = candidates.topk(std::min(2 * beam, beam * vocab), 1);
    const at::Tensor values_cpu = top_values.to(at::kCPU).contiguous();
    const at::Tensor index_cpu = top_index.to(at::kCPU).contiguous();
    const int64_t width = values_cpu.size(1);

    std::vector<int64_t> next_live, order, next_tokens;
    std::vector<float> next_scores;
    std::vector<std::vector<int32_t>> next_history;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t sentence = live[i];
      const float* value = values_cpu.data_ptr<float>() + i * width;
      const int64_t* index = index_cpu.data_ptr<int64_t>() + i * width;
      std::vector<std::pair<int64_t, int64_t>> slots;  // (source row, token)
      std::vector<float> slot_scores;
      for (int64_t j = 0; j < width; ++j) {
        const int64_t row = i * beam + index[j] / vocab;
        const int64_t token = index[j] % vocab;
        if (token == ids.eos) {
          // An ending counts only among the beam best candidates, as in fairseq.
          if (j < beam && std::isfinite(value[j]) &&
              static_cast<int64_t>(finished[sentence].size()) < beam) {
            Hypothesis h;
            h.tokens = history[row];
            h.score = value[j];
            h.normalized_score = h.score / length_penalty(static_cast<int64_t>(h.tokens.size()) + 1,
                                                          options.length_penalty);
            finished[sentence].push_back(std::move(h));
          }
        } else if (static_cast<int64_t>(slots.size()) < beam) {
          slots.emplace_back(row, token);
          slot_scores.push_back(value[j]);
        }
      }
      const bool done = static_cast<int64_t>(finished[sentence].size()) >= beam ||
                        step >= limit[sentence] || static_cast<int64_t>(slots.size()) < beam;
      if (done) continue;
      next_live.push_back(sentence);
      for (size_t k = 0; k < slots.size(); ++k) {
        const auto [row, token] = slots[k];
        order.push_back(row);
        next_tokens.push_back(token);
        next_scores.push_back(slot_scores[k]);
        next_history.push_back(history[row]);
        next_history.back().push_back(static_cast<int32_t>(token));
      }
    }
    if (next_live.empty()) break;
    // While no sentence has left the batch, beams only move within their sentence's rows.
    stepper.reorder(long_tensor(order, device), next_live.size() == live.size());
    last = long_tensor(next_tokens, device);
    scores = at::tensor(next_scores).to(device);
    history = std::move(next_history);
    live = std::move(next_live);
  }

  std::vector<std::vector<Hypothesis>> out(batch);
  for (int64_t i = 0; i < batch; ++i) {
    std::vector<Hypothesis>& hyps = finished[i];
    std::stable_sort(hyps.begin(), hyps.end(), [](const Hypothesis& a, const Hypothesis& b) {
      return a.normalized_score > b.normalized_score;
    });
    if (static_cast<int64_t>(hyps.size()) > options.nbest) hyps.resize(options.nbest);
    out[i] = std::move(hyps);
  }
  return out;
}

}  // namespace nmt::decode
