#pragma once
// The input layer of encoder and decoder: token embeddings, scaled, plus position encodings.

#include <cstdint>

#include <ATen/ATen.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/pimpl.h>

#include "model/model_options.h"

namespace nmt::model {

/// Shape of an input embedding layer.
struct InputEmbeddingOptions {
  /// pad_id must lie in [0, vocab_size).
  InputEmbeddingOptions(int64_t vocab_size, int64_t d_model, int64_t pad_id)
      : vocab_size_(vocab_size), d_model_(d_model), pad_id_(pad_id) {}
  TORCH_ARG(int64_t, vocab_size);  ///< rows of the token table
  TORCH_ARG(int64_t, d_model);     ///< embedding width
  TORCH_ARG(int64_t, pad_id);      ///< padding token; its row is zero and gets no gradient
  TORCH_ARG(PositionEncoding, positions) = PositionEncoding::kSinusoidal;  ///< position encoding
  TORCH_ARG(int64_t, max_positions) = 1024;  ///< longest sequence accepted (tokens)
  TORCH_ARG(bool, scale) = true;             ///< multiply token embeddings by sqrt(d_model)
  TORCH_ARG(double, dropout) = 0.0;          ///< dropout on the sum (training only)
};

/// dropout(scale * table[ids] + position[start + t]) for ids [B, T] -> [B, T, d_model].
/// Positions count from the start of each row, so batches must be right-padded. kM2m100 instead
/// adds row pad_id + (real tokens before the row's first) + (real tokens up to t) of its table,
/// and its zero row pad_id at padding (fairseq's make_positions, as transformers' M2M100): a
/// pad token (model.decoder_start: pad) takes no position, in teacher forcing and incremental
/// decoding alike.
class InputEmbeddingImpl : public torch::nn::Module {
 public:
  /// Builds its own token table, or uses shared_table (owned and registered elsewhere).
  explicit InputEmbeddingImpl(const InputEmbeddingOptions& options,
                              torch::nn::Embedding shared_table = nullptr);

  /// Embeds ids [B, T] whose first token sits at position start_position. kM2m100 counts
  /// real_before [B] (int64: each row's non-pad tokens before ids) in place of start_position
  /// when it is defined; undefined: every one of the start_position tokens before was real.
  at::Tensor forward(const at::Tensor& ids, int64_t start_position = 0,
                     const at::Tensor& real_before = {});

  /// The token table (shared or own), e.g. for tying it to the output projection.
  torch::nn::Embedding table() const { return table_; }

  /// The options this layer was built with.
  const InputEmbeddingOptions& options() const { return options_; }

  /// What the token rows are looked up as (model/fake_quantization.h); kNone when built.
  void set_quantization(Quantization quantization) { quantization_ = quantization; }

 private:
  InputEmbeddingOptions options_;
  Quantization quantization_ = Quantization::kNone;
  torch::nn::Embedding table_{nullptr};
  torch::nn::Embedding learned_positions_{nullptr};  ///< only for kLearned
  at::Tensor sinusoid_;  ///< fixed table [rows, d]: every encoding but kLearned
};
TORCH_MODULE(InputEmbedding);

/// A token table [vocab_size, d_model] drawn from normal(0, d_model^-0.5), pad row zero (as
/// fairseq), so that after scaling by sqrt(d_model) embeddings have unit variance.
torch::nn::Embedding make_token_table(int64_t vocab_size, int64_t d_model, int64_t pad_id);

/// Sinusoidal encodings [positions, d] (Vaswani et al. 2017, sec. 3.5): sines in the first
/// half of the columns, cosines in the second (as tensor2tensor and fairseq).
at::Tensor sinusoidal_positions(int64_t positions, int64_t d_model);

/// MarianMT's encodings [positions, d] (transformers' MarianSinusoidalPositionalEmbedding):
/// angle(t, i) = t / 10000^(2i / d); columns [0, ceil(d/2)) sin(angle(t, i)), the rest
/// cos(angle(t, i)); computed in double and rounded to float32, as numpy does there.
at::Tensor marian_positions(int64_t positions, int64_t d_model);

/// M2M100's table [max_positions + pad_id + 1, d]: sinusoidal_positions with row pad_id zero
/// (transformers' M2M100SinusoidalPositionalEmbedding; padding reads that row).
at::Tensor m2m100_positions(int64_t max_positions, int64_t d_model, int64_t pad_id);

/// M2M100's position rows of ids [B, T] whose first token sits at start_position: pad_id +
/// (start_position + real tokens of the row up to t) at real tokens, pad_id at padding.
at::Tensor m2m100_position_ids(const at::Tensor& ids, int64_t pad_id, int64_t start_position);

/// The same with each row's count of real tokens before ids, real_before [B] (int64), in place
/// of start_position: what incremental decoding knows after a pad start token.
at::Tensor m2m100_position_ids(const at::Tensor& ids, int64_t pad_id,
                               const at::Tensor& real_before);

}  // namespace nmt::model
