// Model FLOPs: the count that MFU divides by. The figures below are worked out by hand from
// the matrix shapes, independently of the formula's code.
#include <catch2/catch.hpp>

#include "model/flops.h"

using nmt::model::ModelOptions;

namespace {

ModelOptions one_layer_each() {
  ModelOptions o;
  o.encoder_layers = 1;
  o.decoder_layers = 1;
  o.d_model = 2;
  o.ffn_dim = 3;
  o.heads = 1;
  return o;
}

}  // namespace

TEST_CASE("forward FLOPs of a one-layer model, counted by hand", "[model][flops]") {
  // Batch 1, source 2, target 3 tokens, vocabulary 5, d 2, ffn 3.
  // Encoder: q,k,v,o 4*(2*2*2*2) = 64; scores + context 2*(2*2*2*2) = 32; ffn 2*(2*2*2*3) = 48.
  // Decoder self-attention: q,k,v,o 4*(2*3*2*2) = 96; scores + context over all 3x3 pairs
  // 2*(2*3*2*3) = 72, or over the causal 1+2+3 = 6 pairs 2*(2*6*2) = 48; cross-attention:
  // q,o over the target 2*(2*3*2*2) = 48, k,v over the source 2*(2*2*2*2) = 32, scores +
  // context 2*(2*3*2*2) = 48; ffn 2*(2*3*2*3) = 72. Output projection 2*3*2*5 = 60.
  const double kernel = (64 + 32 + 48) + (96 + 72 + 48 + 32 + 48 + 72) + 60;
  const double model = kernel - 72 + 48;
  using nmt::model::AttentionCount;
  CHECK(nmt::model::forward_flops(one_layer_each(), 5, 1, 2, 3, AttentionCount::kKernel) == kernel);
  CHECK(nmt::model::forward_flops(one_layer_each(), 5, 1, 2, 3) == model);
  CHECK(nmt::model::training_flops(one_layer_each(), 5, 1, 2, 3) == 3 * model);
  CHECK(nmt::model::training_flops(one_layer_each(), 5, 1, 2, 3, AttentionCount::kKernel) ==
        3 * kernel);
  // Without the score and context products: encoder 32, decoder 72, cross 48 fewer.
  CHECK(nmt::model::forward_flops(one_layer_each(), 5, 1, 2, 3, AttentionCount::kWeights) ==
        kernel - 32 - 72 - 48);
}

TEST_CASE("real-token FLOPs count each pair at its own lengths, not the padded ones",
          "[model][flops]") {
  const ModelOptions o = one_layer_each();
  using nmt::model::training_flops;
  // Pairs (2, 3) and (1, 1) padded to a 2 x (2, 3) batch: padding is not work.
  const double real = nmt::model::real_training_flops(o, 5, {2, 1}, {3, 1});
  CHECK(real == training_flops(o, 5, 1, 2, 3) + training_flops(o, 5, 1, 1, 1));
  CHECK(real < training_flops(o, 5, 2, 2, 3));
  CHECK(nmt::model::real_training_flops(o, 5, {2, 2}, {3, 3}) == training_flops(o, 5, 2, 2, 3));
}

TEST_CASE("FLOPs scale with layers and batch, and approach 6 N D without attention",
          "[model][flops]") {
  ModelOptions o = one_layer_each();
  const double one = nmt::model::forward_flops(o, 5, 1, 2, 3);
  CHECK(nmt::model::forward_flops(o, 5, 4, 2, 3) == 4 * one);
  o.encoder_layers = 3;
  o.decoder_layers = 3;
  const double output = 2.0 * 3 * 2 * 5;
  CHECK(nmt::model::forward_flops(o, 5, 1, 2, 3) - output == Approx(3 * (one - output)));

  // Transformer-base on sentences of 1 token pair: the attention terms vanish next to the
  // weights, so training FLOPs are 6 x (non-embedding parameters + output matrix) x tokens.
  const ModelOptions base;
  const double d = 512, f = 2048, vocab = 32000;
  const double encoder_weights = 6 * (4 * d * d + 2 * d * f);
  const double decoder_weights = 6 * (8 * d * d + 2 * d * f);
  const double tokens = 1000;  // a batch of 1000 pairs, each 1 source and 1 target token
  const double six_n_d = 6 * (encoder_weights + decoder_weights + d * vocab) * tokens;
  CHECK(nmt::model::training_flops(base, 32000, 1000, 1, 1) == Approx(six_n_d).epsilon(1e-3));
}
