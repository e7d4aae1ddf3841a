#include "model/flops.h"

#include <algorithm>

namespace nmt::model {

double forward_flops(const ModelOptions& model, int64_t tgt_vocab, int64_t batch,
                     int64_t src_len, int64_t tgt_len, AttentionCount count) {
  const double b = double(batch), s = double(src_len), t = double(tgt_len);
  const double d = double(model.d_model), f = double(model.ffn_dim);
  // A [m, k] x [k, n] product costs 2 m k n.
  const auto product = [](double m, double k, double n) { return 2.0 * m * k * n; };
  // Self-attention over n positions, each attending to `keys` of them on average: q, k, v and
  // output projections, then scores and context.
  const auto self_attention = [&](double n, double keys) {
    return 4 * product(b * n, d, d) + 2 * product(b * n, d, keys);
  };
  const auto feed_forward = [&](double n) { return 2 * product(b * n, d, f); };
  const bool scores = count != AttentionCount::kWeights;
  const double encoder_layer = self_attention(s, scores ? s : 0) + feed_forward(s);
  // Causal: position i of t attends to i + 1 positions, (t + 1) / 2 on average.
  const double decoder_keys = !scores ? 0 : count == AttentionCount::kModel ? (t + 1) / 2 : t;
  // Cross-attention: q and output projections over the target, k and v over the source,
  // scores and context between them.
  const double cross_attention = 2 * product(b * t, d, d) + 2 * product(b * s, d, d) +
                                 (scores ? 2 * product(b * t, d, s) : 0);
  const double decoder_layer = self_attention(t, decoder_keys) + cross_attention + feed_forward(t);
  const double output = product(b * t, d, double(tgt_vocab));
  return double(model.encoder_layers) * encoder_layer + double(model.decoder_layers) * decoder_layer +
         output;
}

double training_flops(const ModelOptions& model, int64_t tgt_vocab, int64_t batch,
                      int64_t src_len, int64_t tgt_len, AttentionCount count) {
  return 3.0 * forward_flops(model, tgt_vocab, batch, src_len, tgt_len, count);
}

double real_training_flops(const ModelOptions& model, int64_t tgt_vocab,
                           const std::vector<int64_t>& src_lengths,
                           const std::vector<int64_t>& tgt_lengths) {
  double total = 0;
  const size_t n = std::min(src_lengths.size(), tgt_lengths.size());
  for (size_t i = 0; i < n; ++i)
    total += training_flops(model, tgt_vocab, 1, src_lengths[i], tgt_lengths[i]);
  return total;
}

}  // namespace nmt::model
