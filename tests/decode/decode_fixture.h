#pragma once
// The small random Transformer that the search and sampling tests decode with, its ids, and
// random sentences for it.

#include <algorithm>
#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "model/transformer.h"

namespace nmt::test {

constexpr int64_t kPad = 0, kBos = 2, kEos = 3;
constexpr int64_t kVocab = 40;  ///< source and target vocabulary size of tiny_model

/// The shape of a tiny_model.
struct TinyModelOptions {
  int64_t layers = 2;      ///< encoder and decoder layers each
  bool pre_norm = false;   ///< pre-norm instead of post-norm layers
  double eos_scale = 3.0;  ///< factor on the EOS row of the output projection (1: untouched)
  nmt::model::PositionEncoding positions = nmt::model::PositionEncoding::kSinusoidal;  ///< encoding
};

/// A small random model (d_model 32, 4 heads) in eval mode, seeded by seed. With eos_scale > 1
/// random sources end at varied lengths instead of always at the length limit.
inline nmt::model::Transformer tiny_model(uint64_t seed, const TinyModelOptions& t = {}) {
  at::manual_seed(seed);
  nmt::model::ModelOptions o;
  o.encoder_layers = t.layers;
  o.decoder_layers = t.layers;
  o.d_model = 32;
  o.heads = 4;
  o.ffn_dim = 64;
  o.max_positions = 64;
  if (t.pre_norm) o.norm = nmt::model::NormPosition::kPre;
  o.positions = t.positions;
  nmt::model::Transformer model(o, kVocab, kVocab, kPad);
  model->eval();
  if (t.eos_scale != 1.0) {
    at::NoGradGuard no_grad;
    model->output_weight()[kEos].mul_(t.eos_scale);
  }
  return model;
}

/// Random sentences of 1 to 11 ids (4..V-1), each then EOS, drawn from seed.
inline std::vector<std::vector<int64_t>> random_sentences(int64_t count, uint64_t seed) {
  at::manual_seed(seed);
  std::vector<std::vector<int64_t>> out;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t length = at::randint(1, 12, {1}).item<int64_t>();
    const at::Tensor ids = at::randint(4, kVocab, {length}, at::kLong);
    std::vector<int64_t> s(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + length);
    s.push_back(kEos);
    out.push_back(s);
  }
  return out;
}

/// Sentences right-padded with kPad into one int64 batch [N, longest].
inline at::Tensor batch_of(const std::vector<std::vector<int64_t>>& sentences) {
  size_t width = 0;
  for (const auto& s : sentences) width = std::max(width, s.size());
  at::Tensor out = at::full({int64_t(sentences.size()), int64_t(width)}, kPad, at::kLong);
  for (size_t i = 0; i < sentences.size(); ++i)
    for (size_t j = 0; j < sentences[i].size(); ++j) out[i][j] = sentences[i][j];
  return out;
}

}  // namespace nmt::test
