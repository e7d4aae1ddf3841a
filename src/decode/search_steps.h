#pragma once
// The steps that greedy search (search.cpp) and beam search (beam_search.cpp) share: one
// decoder step for every live row (of every model of an ensemble), each row's output length limit,
// and the constraints on a step's tokens. Internal to decode/.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "decode/ensemble.h"
#include "decode/search.h"
#include "model/transformer.h"

namespace nmt::decode {

/// One model's decoder step for every live row, cached (incremental state) or uncached (the
/// whole prefix again), behind one interface so that both searches run the same code.
class ModelStepper {
 public:
  /// Starts rows_per_source rows for each source of `encoded` (consecutive rows, e.g. the
  /// beams of a sentence); cached: with the incremental decoder state, which holds the encoder
  /// side once per source.
  ModelStepper(model::TransformerImpl& model, model::EncoderOutput encoded, bool cached,
               int64_t rows_per_source = 1);

  /// Feeds last_tokens [R] -> float32 log-probabilities [R, V] of the next token, or with
  /// normalized false its float32 logits (which rank the tokens as the log-probabilities do,
  /// without the log-softmax's pass over the vocabulary).
  at::Tensor step(const at::Tensor& last_tokens, bool normalized = true);

  /// Keeps rows `rows` [R'] (int64 on the model's device), in that order, and sources
  /// `sources` [R' / rows_per_source]: group j of rows_per_source rows must come from rows of
  /// source sources[j]. Undefined sources: every source stays (beams moving within their
  /// sentence's rows), so only what depends on the target prefix is gathered.
  void reorder(const at::Tensor& rows, const at::Tensor& sources = {});

 private:
  model::TransformerImpl& model_;
  bool cached_;
  model::DecoderState state_;     // cached
  model::EncoderOutput encoded_;  // uncached: per row
  at::Tensor prefix_;             // uncached: tokens fed so far [R, t]
};

/// The step that search calls: every model of the ensemble steps with its own state (a
/// ModelStepper each), and the log-probabilities are their weighted mean (ensemble.h). One
/// model's are returned as they are, with no extra operation.
class Stepper {
 public:
  /// Encodes src_ids with every model of `models` and starts their steppers, rows_per_source
  /// rows for each source row.
  Stepper(const Ensemble& models, const at::Tensor& src_ids, bool cached,
          int64_t rows_per_source = 1);

  /// Feeds last_tokens [R] -> float32 log-probabilities [R, V] of the next token. With
  /// normalized false, one model's float32 logits instead (an ensemble's mean needs each
  /// member's log-probabilities: it ignores the flag).
  at::Tensor step(const at::Tensor& last_tokens, bool normalized = true);

  /// Whether step(..., false) gives logits (one model) rather than log-probabilities.
  bool steps_logits() const { return members_.size() == 1; }

  /// ModelStepper::reorder of every model.
  void reorder(const at::Tensor& rows, const at::Tensor& sources = {});

 private:
  std::vector<ModelStepper> members_;
  std::vector<double> weights_;
};

/// Each source row's output length limit (max_output_length of its non-pad tokens).
std::vector<int64_t> output_limits(const at::Tensor& src_ids, int64_t pad,
                                   const SearchOptions& options, int64_t max_positions);

/// values as an int64 tensor on device.
at::Tensor long_tensor(const std::vector<int64_t>& values, const at::Device& device);

/// The rows a step keeps (kept[r]) as the order a stepper's reorder takes: a kept row below
/// the number kept stays where it is, and the kept rows past that number fill the places of
/// those that ended, in turn. Rows then move only into the places of ended ones, which the
/// model's state does in place (model/row_selection.h); keeping them in their old order would
/// move every row after the first that ended.
std::vector<int64_t> rows_kept_in_place(const std::vector<bool>& kept);

/// Where beam search puts a sentence's next beams, given the row (0 to beam - 1, within the
/// sentence) that each of its `beam` extensions extends, best first: for each row, the index of
/// the extension it holds. Each extended row keeps its best extension, and the others fill
/// the rows left free, best first. The order of a sentence's beams means nothing to the
/// search (candidates are ranked by score), but a row that keeps its place is not copied in
/// the self-attention caches (they move only the rows that change, when under half do), where
/// ranking by score moved every row whose parent had another rank.
std::vector<size_t> extensions_in_parent_rows(const std::vector<int64_t>& parents);

/// Bans pad and BOS everywhere, and everything but EOS in rows that reached their limit; at a
/// step within ids.forced_prefix, everything but its token, which scores 0.
void constrain(at::Tensor& lprobs, const SearchIds& ids, const std::vector<int64_t>& row_limit,
               int64_t step);

/// Validates options and checks src_ids and ids; throws naming what is wrong.
void check_input(const at::Tensor& src_ids, const SearchIds& ids, const SearchOptions& options);

}  // namespace nmt::decode
