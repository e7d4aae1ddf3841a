#pragma once
// The steps that greedy search (search.cpp) and beam search (beam_search.cpp) share: one
// decoder step for every live row, each row's output length limit, and the constraints on a
// step's tokens. Internal to decode/.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "decode/search.h"
#include "model/transformer.h"

namespace nmt::decode {

/// One decoder step for every live row, cached (incremental state) or uncached (the whole
/// prefix again), behind one interface so that both searches run the same code.
class Stepper {
 public:
  /// Starts from the encoder output of every row; cached: with the incremental decoder state.
  Stepper(model::TransformerImpl& model, model::EncoderOutput encoded, bool cached);

  /// Feeds last_tokens [R] -> float32 log-probabilities [R, V] of the next token.
  at::Tensor step(const at::Tensor& last_tokens);

  /// Keeps rows order [R'] (int64 on the model's device), in that order. With same_sources,
  /// every row keeps the source it had (beams moving within their sentence's block of rows),
  /// so only what depends on the target prefix is gathered, not the encoder side.
  void reorder(const at::Tensor& order, bool same_sources = false);

 private:
  model::TransformerImpl& model_;
  bool cached_;
  model::DecoderState state_;     // cached
  model::EncoderOutput encoded_;  // uncached
  at::Tensor prefix_;             // uncached: tokens fed so far [R, t]
};

/// Each source row's output length limit (max_output_length of its non-pad tokens).
std::vector<int64_t> output_limits(const at::Tensor& src_ids, int64_t pad,
                                   const SearchOptions& options, int64_t max_positions);

/// values as an int64 tensor on device.
at::Tensor long_tensor(const std::vector<int64_t>& values, const at::Device& device);

/// Bans pad and BOS everywhere, and everything but EOS in rows that reached their limit; at a
/// step within ids.forced_prefix, everything but its token, which scores 0.
void constrain(at::Tensor& lprobs, const SearchIds& ids, const std::vector<int64_t>& row_limit,
               int64_t step);

/// Validates options and checks src_ids and ids; throws naming what is wrong.
void check_input(const model::TransformerImpl& model, const at::Tensor& src_ids,
                 const SearchIds& ids, const SearchOptions& options);

}  // namespace nmt::decode
