#include "model/embedding.h"

#include <algorithm>
#include <cmath>

#include <torch/nn/init.h>

#include "model/dropout.h"
#include "model/fake_quantization.h"
#include "model/initialization.h"
#include "util/error.h"

namespace nmt::model {

torch::nn::Embedding make_token_table(int64_t vocab_size, int64_t d_model, int64_t pad_id) {
  NMT_CHECK(pad_id >= 0 && pad_id < vocab_size, nmt::ConfigError,
            "padding id: expected a token id in [0, {}), found {}", vocab_size, pad_id);
  // padding_idx keeps the pad row's gradient zero, so the row stays zero while training.
  auto options = torch::nn::EmbeddingOptions(vocab_size, d_model).padding_idx(pad_id);
  // A given weight is taken as it is: torch::nn::Embedding's own draws are left out too.
  if (!initializing())
    return torch::nn::Embedding(options._weight(at::empty({vocab_size, d_model})));
  torch::nn::Embedding table(options);
  torch::nn::init::normal_(table->weight, 0.0, std::pow(static_cast<double>(d_model), -0.5));
  torch::NoGradGuard no_grad;
  table->weight[pad_id].zero_();
  return table;
}

at::Tensor sinusoidal_positions(int64_t positions, int64_t d_model) {
  const int64_t half = d_model / 2;
  // Wavelengths grow geometrically from 2*pi to 10000*2*pi; the max(.,1) guards d_model = 2.
  const double log_step = std::log(10000.0) / static_cast<double>(std::max<int64_t>(half - 1, 1));
  const at::Tensor inv_freq = at::exp(at::arange(half, at::kFloat) * -log_step);
  const at::Tensor angles = at::arange(positions, at::kFloat).unsqueeze(1) * inv_freq.unsqueeze(0);
  at::Tensor table = at::cat({at::sin(angles), at::cos(angles)}, 1);
  // An odd width gets one zero column.
  if (d_model % 2 == 1) table = at::cat({table, at::zeros({positions, 1})}, 1);
  return table;
}

at::Tensor marian_positions(int64_t positions, int64_t d_model) {
  // Column j of numpy's table has angle t / 10000^(2 * (j / 2) / d); the even columns go to
  // sines, the odd ones to cosines, so both halves run over i = j / 2.
  const int64_t sines = (d_model + 1) / 2;
  const at::Tensor i = at::arange(sines, at::kDouble);
  const at::Tensor denominator = at::pow(10000.0, i * 2.0 / static_cast<double>(d_model));
  const at::Tensor angles =
      at::arange(positions, at::kDouble).unsqueeze(1) / denominator.unsqueeze(0);
  return at::cat({at::sin(angles), at::cos(angles.slice(1, 0, d_model / 2))}, 1).to(at::kFloat);
}

at::Tensor m2m100_positions(int64_t max_positions, int64_t d_model, int64_t pad_id) {
  at::Tensor table = sinusoidal_positions(max_positions + pad_id + 1, d_model);
  table[pad_id].zero_();
  return table;
}

at::Tensor m2m100_position_ids(const at::Tensor& ids, int64_t pad_id, int64_t start_position) {
  const at::Tensor real = ids.ne(pad_id).to(at::kLong);
  return (real.cumsum(1) + start_position) * real + pad_id;
}

at::Tensor m2m100_position_ids(const at::Tensor& ids, int64_t pad_id,
                               const at::Tensor& real_before) {
  TORCH_CHECK(real_before.dim() == 1 && real_before.size(0) == ids.size(0),
              "m2m100 positions: expected real_before [", ids.size(0), "], found ",
              real_before.sizes());
  const at::Tensor real = ids.ne(pad_id).to(at::kLong);
  return (real.cumsum(1) + real_before.unsqueeze(1)) * real + pad_id;
}

InputEmbeddingImpl::InputEmbeddingImpl(const InputEmbeddingOptions& options,
                                       torch::nn::Embedding shared_table)
    : options_(options) {
  if (shared_table) {
    // Deliberately not registered: a tensor registered under two names appears twice in
    // parameters(), and the optimizer and gradient all-reduce would then update it twice.
    table_ = shared_table;
    NMT_CHECK(table_->weight.size(0) == options.vocab_size() &&
                  table_->weight.size(1) == options.d_model(),
              nmt::ConfigError, "shared embedding: expected a [{}, {}] table, found [{}, {}]",
              options.vocab_size(), options.d_model(), table_->weight.size(0),
              table_->weight.size(1));
  } else {
    table_ = register_module(
        "tokens", make_token_table(options.vocab_size(), options.d_model(), options.pad_id()));
  }
  if (options.positions() == PositionEncoding::kLearned) {
    const int64_t rows = options.max_positions(), d = options.d_model();
    if (initializing()) {
      learned_positions_ = register_module("positions", torch::nn::Embedding(rows, d));
      torch::nn::init::normal_(learned_positions_->weight, 0.0,
                               std::pow(static_cast<double>(d), -0.5));
    } else {
      learned_positions_ = register_module(
          "positions",
          torch::nn::Embedding(torch::nn::EmbeddingOptions(rows, d)._weight(at::empty({rows, d}))));
    }
  } else {
    // A buffer so that .to(device) moves it; it is a pure function of the options, never
    // stored in checkpoints.
    const int64_t rows = options.max_positions(), d = options.d_model();
    at::Tensor table;
    switch (options.positions()) {
      case PositionEncoding::kMarian:
        table = marian_positions(rows, d);
        break;
      case PositionEncoding::kM2m100:
        table = m2m100_positions(rows, d, options.pad_id());
        break;
      default:
        table = sinusoidal_positions(rows, d);
        break;
    }
    sinusoid_ = register_buffer("sinusoid", table);
  }
}

at::Tensor InputEmbeddingImpl::forward(const at::Tensor& ids, int64_t start_position,
                                       const at::Tensor& real_before) {
  TORCH_CHECK(ids.dim() == 2, "embedding: expected ids [B, T], found ", ids.sizes());
  const int64_t end = start_position + ids.size(1);
  NMT_CHECK(end <= options_.max_positions(), nmt::DataError,
            "sequence too long: expected at most model.max_positions = {} tokens, found {}",
            options_.max_positions(), end);
  // Rows are quantized one by one, so quantizing the rows looked up is quantizing the table.
  at::Tensor x = quantize_as(table_(ids), quantization_);
  if (options_.scale()) x = x * std::sqrt(static_cast<double>(options_.d_model()));
  if (learned_positions_) {
    x = x + learned_positions_->weight.slice(0, start_position, end);
  } else if (options_.positions() == PositionEncoding::kM2m100) {
    // Never past row pad_id + end: real_before counts at most the start_position tokens before.
    const at::Tensor rows = real_before.defined()
                                ? m2m100_position_ids(ids, options_.pad_id(), real_before)
                                : m2m100_position_ids(ids, options_.pad_id(), start_position);
    x = x + sinusoid_.index_select(0, rows.reshape(-1)).view({ids.size(0), ids.size(1), -1});
  } else {
    x = x + sinusoid_.slice(0, start_position, end);
  }
  return model::dropout(x, options_.dropout(), is_training());
}

}  // namespace nmt::model
