#include "model/flops.h"

namespace nmt::model {

double forward_flops(const ModelOptions& model, int64_t tgt_vocab, int64_t batch,
                     int64_t src_len, int64_t tgt_len) {
  const double b = double(batch), s = double(src_len), t = double(tgt_len);
  const double d = double(model.d_model), f = double(model.ffn_dim);
  // A [m, k] x [k, n] product costs 2 m k n.
  const auto product = [](double m, double k, double n) { return 2.0 * m * k * n; };
  // Self-attention over n positions: q, k, v and output projections, scores and context.
  const auto self_attention = [&](double n) {
    return 4 * product(b * n, d, d) + 2 * product(b * n, d, n);
  };
  const auto feed_forward = [&](double n) { return 2 * product(b * n, d, f); };
  const double encoder_layer = self_attention(s) + feed_forward(s);
  // Cross-attention: q and output projections over the target, k and v over the source,
  // scores and context between them.
  const double cross_attention =
      2 * product(b * t, d, d) + 2 * product(b * s, d, d) + 2 * product(b * t, d, s);
  const double decoder_layer = self_attention(t) + cross_attention + feed_forward(t);
  const double output = product(b * t, d, double(tgt_vocab));
  return double(model.encoder_layers) * encoder_layer + double(model.decoder_layers) * decoder_layer +
         output;
}

double training_flops(const ModelOptions& model, int64_t tgt_vocab, int64_t batch,
                      int64_t src_len, int64_t tgt_len) {
  return 3.0 * forward_flops(model, tgt_vocab, batch, src_len, tgt_len);
}

}  // namespace nmt::model
