// model/transformer: cached incremental decoding (what nmt-translate and validation decode
// with) feeds each token at the position teacher forcing (training) gave it, for every
// model.positions and model.decoder_start the config accepts.
#include "catch_torch.h"  // first: see the header

#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "model/embedding.h"
#include "model/model_options.h"
#include "model/transformer.h"

using nmt::model::DecoderStart;
using nmt::model::DecoderState;
using nmt::model::EncoderOutput;
using nmt::model::ModelOptions;
using nmt::model::PositionEncoding;
using nmt::model::Transformer;

namespace {

constexpr int64_t kPad = 1, kBos = 2, kEos = 3;
constexpr int64_t kVocab = 11;
// Per-step log-probabilities of a 2-layer d=16 model: float32 rounding is about 1e-6 of
// values near ln(11); a position one row off moves them by 1e-2 or more.
constexpr double kTolerance = 1e-5;

const std::vector<std::pair<std::string, PositionEncoding>> kPositions{
    {"sinusoidal", PositionEncoding::kSinusoidal},
    {"learned", PositionEncoding::kLearned},
    {"marian", PositionEncoding::kMarian},
    {"m2m100", PositionEncoding::kM2m100}};
const std::vector<std::pair<std::string, DecoderStart>> kStarts{
    {"bos", DecoderStart::kBos}, {"eos", DecoderStart::kEos}, {"pad", DecoderStart::kPad}};

Transformer tiny_model(PositionEncoding positions) {
  ModelOptions o;
  o.encoder_layers = 2;
  o.decoder_layers = 2;
  o.d_model = 16;
  o.heads = 4;
  o.ffn_dim = 32;
  o.max_positions = 32;
  o.positions = positions;
  at::manual_seed(7);
  Transformer model(o, kVocab, kVocab, kPad);
  model->eval();
  return model;
}

at::Tensor rows(const std::vector<std::vector<int64_t>>& values) {
  at::Tensor t = at::empty({int64_t(values.size()), int64_t(values.front().size())}, at::kLong);
  for (size_t r = 0; r < values.size(); ++r)
    for (size_t c = 0; c < values[r].size(); ++c) t[int64_t(r)][int64_t(c)] = values[r][c];
  return t;
}

/// Teacher-forced log-probabilities [B, T, V] of the decoder input tgt_in.
at::Tensor forced_lprobs(Transformer& model, const at::Tensor& src, const at::Tensor& tgt_in) {
  return model->decode(tgt_in, model->encode(src)).log_softmax(-1);
}

}  // namespace

TEST_CASE("cached decoding scores as teacher forcing for every positions and decoder_start",
          "[model]") {
  c10::InferenceMode guard;
  const at::Tensor src = rows({{5, 6, 7, kEos, kPad}, {8, 9, 10, 4, kEos}});
  for (const auto& [positions_name, positions] : kPositions) {
    Transformer model = tiny_model(positions);
    for (const auto& [start_name, start] : kStarts) {
      INFO("model.positions " << positions_name << ", model.decoder_start " << start_name);
      const int64_t s = nmt::model::decoder_start_id(start, kBos, kEos, kPad);
      const at::Tensor tgt_in = rows({{s, 4, 5, 6, 7, 8}, {s, 7, 8, 9, 10, 4}});
      const at::Tensor full = forced_lprobs(model, src, tgt_in);
      DecoderState state = model->init_state(model->encode(src));
      for (int64_t t = 0; t < 3; ++t) {
        INFO("step " << t);
        const at::Tensor step = model->decode_step(tgt_in.select(1, t), state).log_softmax(-1);
        CHECK(at::allclose(step, full.select(1, t), kTolerance, kTolerance));
      }
      // As beam search does: row 1 kept twice, row 0 dropped, then the copies diverge.
      const at::Tensor order = at::tensor({1, 1}, at::kLong);
      model->reorder_state(state, order);
      at::Tensor tgt_reordered = tgt_in.index_select(0, order).clone();
      tgt_reordered[1][3] = 5;
      const at::Tensor full_reordered =
          forced_lprobs(model, src.index_select(0, order), tgt_reordered);
      for (int64_t t = 3; t < tgt_in.size(1); ++t) {
        INFO("step " << t << " after reorder_state");
        const at::Tensor step =
            model->decode_step(tgt_reordered.select(1, t), state).log_softmax(-1);
        CHECK(at::allclose(step, full_reordered.select(1, t), kTolerance, kTolerance));
      }
    }
  }
}
