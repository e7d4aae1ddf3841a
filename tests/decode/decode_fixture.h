#pragma once
// The small random Transformer that the search and sampling tests decode with, and its ids.

#include <cstdint>

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

}  // namespace nmt::test
