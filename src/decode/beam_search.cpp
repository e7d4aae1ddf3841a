#include "decode/search.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <ATen/ATen.h>

#include "decode/beam_candidates.h"
#include "decode/search_steps.h"

namespace nmt::decode {
namespace {

/// beam_search's state between steps. Rows are sentence-major: row i * beam + k is beam k of
/// the i-th live sentence.
struct Beams {
  std::vector<int64_t> live;                  ///< sentence of each block of beam rows
  std::vector<std::vector<int32_t>> history;  ///< tokens of each row so far
  at::Tensor scores;                          ///< [rows] float32 score of each row
  at::Tensor last;                            ///< [rows] int64 token each row feeds next
};

/// The first beams: `beam` rows of BOS per sentence (the stepper's rows), of which only beam 0
/// is live, so that the first step's candidates are distinct.
Beams start_beams(int64_t batch, int64_t beam, int64_t bos, const at::Device& device) {
  Beams beams;
  beams.live.resize(batch);
  std::vector<float> beam_score;
  for (int64_t i = 0; i < batch; ++i) {
    beams.live[i] = i;
    for (int64_t k = 0; k < beam; ++k)
      beam_score.push_back(k == 0 ? 0.0f : -std::numeric_limits<float>::infinity());
  }
  beams.history.resize(batch * beam);
  beams.scores = at::tensor(beam_score).to(device);
  beams.last = at::full({batch * beam}, bos, at::TensorOptions().dtype(at::kLong).device(device));
  return beams;
}

/// A beam of the next step: the row it extends, the token it adds, its score.
struct Extension {
  int64_t row = 0;
  int64_t token = 0;
  float score = 0.0f;
};

/// Goes through the candidates of the i-th live sentence, best first: an EOS among the beam
/// best ends a hypothesis (into finished, while it holds fewer than beam), as in fairseq; the
/// first beam other candidates are the sentence's extensions (fewer when they run out).
std::vector<Extension> sort_candidates(const Candidates& c, int64_t i, int64_t beam, int64_t eos,
                                       double alpha,
                                       const std::vector<std::vector<int32_t>>& history,
                                       std::vector<Hypothesis>& finished) {
  const float* value = c.values.data_ptr<float>() + i * c.width;
  const int64_t* index = c.index.data_ptr<int64_t>() + i * c.width;
  std::vector<Extension> extensions;
  for (int64_t j = 0; j < c.width; ++j) {
    const int64_t row = i * beam + index[j] / c.vocab;
    const int64_t token = index[j] % c.vocab;
    if (token == eos) {
      if (j < beam && std::isfinite(value[j]) && static_cast<int64_t>(finished.size()) < beam) {
        Hypothesis h;
        h.tokens = history[row];
        h.score = value[j];
        h.normalized_score =
            h.score / length_penalty(static_cast<int64_t>(h.tokens.size()) + 1, alpha);
        finished.push_back(std::move(h));
      }
    } else if (static_cast<int64_t>(extensions.size()) < beam) {
      extensions.push_back({row, token, value[j]});
    }
  }
  return extensions;
}

/// The i-th live sentence's `beam` extensions, each in its parent's row where it can be
/// (extensions_in_parent_rows).
std::vector<Extension> in_parent_rows(const std::vector<Extension>& extensions, int64_t i,
                                      int64_t beam) {
  std::vector<int64_t> parents;
  for (const Extension& e : extensions) parents.push_back(e.row - i * beam);
  std::vector<Extension> placed;
  for (size_t e : extensions_in_parent_rows(parents)) placed.push_back(extensions[e]);
  return placed;
}

/// The beams of the next step, gathered sentence by sentence.
struct NextBeams {
  std::vector<int64_t> live, order, tokens;  ///< sentences; rows extended; tokens added
  std::vector<int64_t> sources;              ///< each sentence's index among the current live
  std::vector<float> scores;
  std::vector<std::vector<int32_t>> history;

  /// Adds the extensions of the i-th live sentence, `sentence`, of the rows in history.
  void add(int64_t i, int64_t sentence, const std::vector<Extension>& extensions,
           const std::vector<std::vector<int32_t>>& from) {
    live.push_back(sentence);
    sources.push_back(i);
    for (const Extension& e : extensions) {
      order.push_back(e.row);
      tokens.push_back(e.token);
      scores.push_back(e.score);
      history.push_back(from[e.row]);
      history.back().push_back(static_cast<int32_t>(e.token));
    }
  }
};

/// next, whose sentences are in their current order, with the sentences ordered as
/// rows_kept_in_place orders rows: one that stays below the new count keeps its place, and the
/// last ones fill the places of those that ended. The stepper then moves only those sentences'
/// encoder keys and values and source masks (model/row_selection.h). Every sentence in next has
/// exactly `beam` rows.
NextBeams kept_in_place(NextBeams next, size_t sentences, int64_t beam) {
  std::vector<bool> kept(sentences);
  std::vector<size_t> block(sentences);  // the place of current sentence i in next
  for (size_t b = 0; b < next.sources.size(); ++b) {
    kept[next.sources[b]] = true;
    block[next.sources[b]] = b;
  }
  NextBeams out;
  for (int64_t source : rows_kept_in_place(kept)) {
    const size_t b = block[source];
    out.live.push_back(next.live[b]);
    out.sources.push_back(source);
    for (size_t row = b * beam; row < (b + 1) * beam; ++row) {
      out.order.push_back(next.order[row]);
      out.tokens.push_back(next.tokens[row]);
      out.scores.push_back(next.scores[row]);
      out.history.push_back(std::move(next.history[row]));
    }
  }
  return out;
}

/// Moves beams (and the stepper's rows) to the next step's.
void advance(Stepper& stepper, Beams& beams, NextBeams next, int64_t beam,
             const at::Device& device) {
  // While no sentence has left the batch, beams only move within their sentence's rows.
  if (next.live.size() == beams.live.size()) {
    stepper.reorder(long_tensor(next.order, device));
  } else {
    next = kept_in_place(std::move(next), beams.live.size(), beam);
    stepper.reorder(long_tensor(next.order, device), long_tensor(next.sources, device));
  }
  beams.last = long_tensor(next.tokens, device);
  beams.scores = at::tensor(next.scores).to(device);
  beams.history = std::move(next.history);
  beams.live = std::move(next.live);
}

/// The nbest finished hypotheses of each sentence, best normalized score first (ties in the
/// order they finished).
std::vector<std::vector<Hypothesis>> best_of(std::vector<std::vector<Hypothesis>> finished,
                                             int64_t nbest) {
  for (std::vector<Hypothesis>& hyps : finished) {
    std::stable_sort(hyps.begin(), hyps.end(), [](const Hypothesis& a, const Hypothesis& b) {
      return a.normalized_score > b.normalized_score;
    });
    if (static_cast<int64_t>(hyps.size()) > nbest) hyps.resize(nbest);
  }
  return finished;
}

}  // namespace

std::vector<std::vector<Hypothesis>> beam_search(const Ensemble& models, const at::Tensor& src_ids,
                                                 const SearchIds& ids,
                                                 const SearchOptions& options) {
  check_input(src_ids, ids, options);
  c10::InferenceMode inference;
  const int64_t batch = src_ids.size(0);
  const int64_t beam = options.beam;
  const at::Device device = src_ids.device();
  const std::vector<int64_t> limit =
      output_limits(src_ids, ids.pad, options, models.max_positions());
  if (batch == 0) return {};

  Stepper stepper(models, src_ids, options.cached, beam);
  Beams beams = start_beams(batch, beam, ids.start, device);
  std::vector<std::vector<Hypothesis>> finished(batch);
  for (int64_t step = 0; !beams.live.empty(); ++step) {
    const int64_t n = static_cast<int64_t>(beams.live.size());
    at::Tensor lprobs = stepper.step(beams.last);
    std::vector<int64_t> row_limit(n * beam);
    for (int64_t r = 0; r < n * beam; ++r) row_limit[r] = limit[beams.live[r / beam]];
    constrain(lprobs, ids, row_limit, step);
    const Candidates candidates = best_candidates(beams.scores, lprobs, n, beam);
    NextBeams next;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t sentence = beams.live[i];
      const std::vector<Extension> extensions = sort_candidates(
          candidates, i, beam, ids.eos, options.length_penalty, beams.history, finished[sentence]);
      const bool done = static_cast<int64_t>(finished[sentence].size()) >= beam ||
                        step >= limit[sentence] || static_cast<int64_t>(extensions.size()) < beam;
      if (!done) next.add(i, sentence, in_parent_rows(extensions, i, beam), beams.history);
    }
    if (next.live.empty()) break;
    advance(stepper, beams, std::move(next), beam, device);
  }
  return best_of(std::move(finished), options.nbest);
}

}  // namespace nmt::decode
