#include "catch_torch.h"  // first: see the header
#include "skip.h"

#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/utils.h>

#include "model/attention.h"
#include "model/embedding.h"
#include "model/layers.h"
#include "model/transformer.h"
#include "util/error.h"


using nmt::model::Activation;
using nmt::model::DecoderStart;
using nmt::model::DecoderState;
using nmt::model::EncoderOutput;
using nmt::model::ModelOptions;
using nmt::model::NormPosition;
using nmt::model::PositionEncoding;
using nmt::model::TiedEmbeddings;
using nmt::model::Transformer;

namespace {

constexpr int64_t kPad = 1;
constexpr int64_t kVocab = 11;

/// A model small enough to run a forward pass in milliseconds.
ModelOptions tiny_options() {
  ModelOptions o;
  o.encoder_layers = 2;
  o.decoder_layers = 2;
  o.d_model = 16;
  o.heads = 4;
  o.ffn_dim = 32;
  o.dropout = 0.1;
  o.attention_dropout = 0.1;
  o.activation_dropout = 0.1;
  o.max_positions = 32;
  return o;
}

/// The variants every behavioural test runs on: both norms, both position encodings, every
/// tying mode and both activations.
std::vector<std::pair<std::string, ModelOptions>> variants() {
  std::vector<std::pair<std::string, ModelOptions>> v;
  v.emplace_back("post-norm, sinusoidal, tie all, relu", tiny_options());
  ModelOptions pre = tiny_options();
  pre.norm = NormPosition::kPre;
  pre.positions = PositionEncoding::kLearned;
  pre.tie_embeddings = TiedEmbeddings::kNone;
  pre.activation = Activation::kGelu;
  v.emplace_back("pre-norm, learned, tie none, gelu", pre);
  ModelOptions dec = tiny_options();
  dec.tie_embeddings = TiedEmbeddings::kDecoder;
  dec.scale_embeddings = false;
  v.emplace_back("post-norm, sinusoidal, tie decoder, unscaled", dec);
  ModelOptions marian = tiny_options();
  marian.positions = PositionEncoding::kMarian;
  marian.activation = Activation::kSilu;
  marian.output_bias = true;
  v.emplace_back("post-norm, marian positions, silu, output bias", marian);
  ModelOptions m2m100 = tiny_options();
  m2m100.norm = NormPosition::kPre;
  m2m100.positions = PositionEncoding::kM2m100;
  v.emplace_back("pre-norm, m2m100 positions", m2m100);
  return v;
}

Transformer make_model(const ModelOptions& o, uint64_t seed = 1) {
  torch::manual_seed(seed);
  Transformer model(o, kVocab, kVocab, kPad);
  model->eval();
  return model;
}

at::Tensor ids(std::vector<std::vector<int64_t>> rows) {
  const int64_t cols = static_cast<int64_t>(rows.front().size());
  at::Tensor t = at::empty({static_cast<int64_t>(rows.size()), cols}, at::kLong);
  for (size_t r = 0; r < rows.size(); ++r) {
    REQUIRE(static_cast<int64_t>(rows[r].size()) == cols);
    for (int64_t c = 0; c < cols; ++c) t[r][c] = rows[r][c];
  }
  return t;
}

// Source rows right-padded with kPad; targets start with BOS (id 2).
at::Tensor source() { return ids({{5, 6, 7, kPad, kPad}, {8, 9, 10, 4, 3}}); }
at::Tensor target() { return ids({{2, 4, 5, 6}, {2, 7, 8, kPad}}); }

bool all_finite(const at::Tensor& t) { return at::isfinite(t).all().item<bool>(); }

}  // namespace

TEST_CASE("forward, encode and decode give batch-first shapes", "[model]") {
  for (const auto& [name, o] : variants()) {
    INFO(name);
    Transformer model = make_model(o);
    const EncoderOutput enc = model->encode(source());
    CHECK(enc.out.sizes() == at::IntArrayRef({2, 5, 16}));
    CHECK(enc.src_pad_mask.sizes() == at::IntArrayRef({2, 5}));
    CHECK(enc.src_pad_mask[0][3].item<bool>());
    CHECK_FALSE(enc.src_pad_mask[0][2].item<bool>());
    CHECK(model->decode(target(), enc).sizes() == at::IntArrayRef({2, 4, kVocab}));
    model->train();
    CHECK(model->forward(source(), target()).sizes() == at::IntArrayRef({2, 4, kVocab}));
  }
}

namespace {

using nmt::model::AttentionKind;
using nmt::model::MultiheadAttention;
using nmt::model::MultiheadAttentionOptions;

MultiheadAttention attention(int64_t d, int64_t heads, AttentionKind kind) {
  return MultiheadAttention(MultiheadAttentionOptions(d, heads).kind(kind));
}

/// Cross-attention from query to memory.
at::Tensor cross(MultiheadAttention& attn, const at::Tensor& query, const at::Tensor& memory,
                 const at::Tensor& mask = {}) {
  return attn->attend(query, attn->project_key_value(memory), mask);
}

/// A parameter of a module by name.
at::Tensor parameter(const torch::nn::Module& module, const std::string& name) {
  return module.named_parameters()[name];
}

/// Attention as computed before the fusion: separate [d, d] q, k, v projections (here the
/// row blocks of the fused weights), SDPA, output projection.
at::Tensor split_attention(const torch::nn::Module& attn, int64_t heads, const at::Tensor& x,
                           const at::Tensor& memory, const at::Tensor& mask, bool causal) {
  std::vector<at::Tensor> w, b;
  if (attn.named_parameters().contains("qkv_proj.weight")) {
    w = parameter(attn, "qkv_proj.weight").chunk(3, 0);
    b = parameter(attn, "qkv_proj.bias").chunk(3, 0);
  } else {
    w = parameter(attn, "kv_proj.weight").chunk(2, 0);
    b = parameter(attn, "kv_proj.bias").chunk(2, 0);
    w.insert(w.begin(), parameter(attn, "q_proj.weight"));
    b.insert(b.begin(), parameter(attn, "q_proj.bias"));
  }
  const auto heads_of = [&](const at::Tensor& t) {
    return t.view({t.size(0), t.size(1), heads, -1}).transpose(1, 2).contiguous();
  };
  const at::Tensor q = heads_of(at::linear(x, w[0].contiguous(), b[0]));
  const at::Tensor k = heads_of(at::linear(memory, w[1].contiguous(), b[1]));
  const at::Tensor v = heads_of(at::linear(memory, w[2].contiguous(), b[2]));
  const std::optional<at::Tensor> m = mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt;
  const at::Tensor context = at::scaled_dot_product_attention(q, k, v, m, 0.0, causal);
  return at::linear(context.transpose(1, 2).reshape({x.size(0), x.size(1), -1}),
                    parameter(attn, "out_proj.weight"), parameter(attn, "out_proj.bias"));
}

}  // namespace

TEST_CASE("attention ignores the content of masked keys", "[model]") {
  torch::manual_seed(3);
  MultiheadAttention attn = attention(8, 2, AttentionKind::kCross);
  const at::Tensor query = at::randn({2, 3, 8});
  at::Tensor memory = at::randn({2, 4, 8});
  // Row 0 may not attend to key 3, row 1 to keys 2 and 3.
  const at::Tensor mask = at::tensor({1, 1, 1, 0, 1, 1, 0, 0}).to(at::kBool).view({2, 1, 1, 4});
  const at::Tensor before = cross(attn, query, memory, mask);
  memory.slice(1, 2, 4).normal_(0.0, 10.0);
  const at::Tensor after = cross(attn, query, memory, mask);
  CHECK_FALSE(at::allclose(before[0], after[0], 0.0, 1e-6));  // key 2 is visible to row 0
  CHECK(at::allclose(before[1], after[1], 0.0, 1e-6));
  // Without the mask the same change is visible: the comparison above can fail.
  CHECK_FALSE(at::allclose(cross(attn, query, memory)[1], after[1], 0.0, 1e-3));
}

TEST_CASE("half-precision CPU attention (the math path) matches float32 SDPA", "[model]") {
  torch::manual_seed(4);
  MultiheadAttention self_attn = attention(16, 4, AttentionKind::kSelf);
  MultiheadAttention cross_attn = attention(16, 4, AttentionKind::kCross);
  self_attn->eval();
  cross_attn->eval();
  const at::Tensor query = at::randn({3, 5, 16});
  const at::Tensor memory = at::randn({3, 7, 16});
  const at::Tensor mask =
      at::tensor({1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0})
          .to(at::kBool)
          .view({3, 1, 1, 7});
  const at::Tensor full = cross(cross_attn, query, memory, mask);
  const at::Tensor causal = self_attn(query, at::Tensor(), /*causal=*/true);
  self_attn->to(at::kBFloat16);
  cross_attn->to(at::kBFloat16);
  const at::Tensor half = cross(cross_attn, query.to(at::kBFloat16), memory.to(at::kBFloat16), mask);
  const at::Tensor half_causal = self_attn(query.to(at::kBFloat16), at::Tensor(), /*causal=*/true);
  CHECK(at::allclose(half.to(at::kFloat), full, 3e-2, 3e-2));
  CHECK(at::allclose(half_causal.to(at::kFloat), causal, 3e-2, 3e-2));
}

TEST_CASE("fused q/k/v projections compute what separate ones did", "[model]") {
  torch::manual_seed(6);
  const at::Tensor x = at::randn({3, 5, 16});
  const at::Tensor memory = at::randn({3, 7, 16});
  const at::Tensor mask = at::rand({3, 1, 1, 7}).gt(0.3).logical_or(at::arange(7).eq(0).view({1, 1, 1, 7}));
  SECTION("self-attention, causal and masked") {
    MultiheadAttention attn = attention(16, 4, AttentionKind::kSelf);
    attn->eval();
    const at::Tensor self_mask = mask.slice(3, 0, 5);
    CHECK(at::allclose(attn(x, at::Tensor(), true), split_attention(*attn, 4, x, x, {}, true),
                       1e-5, 1e-6));
    CHECK(at::allclose(attn(x, self_mask), split_attention(*attn, 4, x, x, self_mask, false),
                       1e-5, 1e-6));
  }
  SECTION("cross-attention") {
    MultiheadAttention attn = attention(16, 4, AttentionKind::kCross);
    attn->eval();
    CHECK(at::allclose(cross(attn, x, memory, mask),
                       split_attention(*attn, 4, x, memory, mask, false), 1e-5, 1e-6));
  }
  SECTION("incremental self-attention equals the causal one") {
    MultiheadAttention attn = attention(16, 4, AttentionKind::kSelf);
    attn->eval();
    nmt::model::KeyValueCache cache;
    std::vector<at::Tensor> steps;
    for (int64_t t = 0; t < x.size(1); ++t) steps.push_back(attn->step(x.slice(1, t, t + 1), cache));
    CHECK(at::allclose(at::cat(steps, 1), attn(x, at::Tensor(), true), 1e-5, 1e-6));
  }
}

TEST_CASE("a fused projection is initialized as its separate [d, d] blocks were", "[model]") {
  // The same seed gives the same weights as the four separate [d, d] layers before the fusion
  // (all built, then each initialized): fresh runs start from the same parameters.
  const int64_t d = 16;
  const auto separate = [&] {
    std::vector<nmt::model::Linear> layers;
    for (int i = 0; i < 4; ++i) layers.emplace_back(d, d);
    std::vector<at::Tensor> weights;
    for (auto& linear : layers) {
      nmt::model::init_projection(linear);
      weights.push_back(linear->weight);
    }
    return weights;
  };
  torch::manual_seed(7);
  MultiheadAttention self_attn = attention(d, 4, AttentionKind::kSelf);
  torch::manual_seed(7);
  const std::vector<at::Tensor> before = separate();
  CHECK(at::equal(parameter(*self_attn, "qkv_proj.weight"),
                  at::cat({before[0], before[1], before[2]}, 0)));
  CHECK(at::equal(parameter(*self_attn, "out_proj.weight"), before[3]));
  CHECK(parameter(*self_attn, "qkv_proj.bias").abs().sum().item<float>() == 0);

  torch::manual_seed(8);
  MultiheadAttention cross_attn = attention(d, 4, AttentionKind::kCross);
  torch::manual_seed(8);
  const std::vector<at::Tensor> cross_before = separate();
  CHECK(at::equal(parameter(*cross_attn, "q_proj.weight"), cross_before[0]));
  CHECK(at::equal(parameter(*cross_attn, "kv_proj.weight"),
                  at::cat({cross_before[1], cross_before[2]}, 0)));
  CHECK(at::equal(parameter(*cross_attn, "out_proj.weight"), cross_before[3]));
}

TEST_CASE("source padding is invisible to every real position", "[model]") {
  for (const auto& [name, o] : variants()) {
    INFO(name);
    Transformer model = make_model(o);
    const at::Tensor padded = ids({{5, 6, 7, kPad, kPad}});
    const at::Tensor unpadded = ids({{5, 6, 7}});
    const at::Tensor tgt = ids({{2, 4, 5}});
    const EncoderOutput enc_padded = model->encode(padded);
    const EncoderOutput enc_unpadded = model->encode(unpadded);
    CHECK(at::allclose(enc_padded.out.slice(1, 0, 3), enc_unpadded.out, 1e-5, 1e-6));
    CHECK(
        at::allclose(model->decode(tgt, enc_padded), model->decode(tgt, enc_unpadded), 1e-5, 1e-6));
    // A batch neighbour of another length changes nothing either.
    const at::Tensor batch = ids({{5, 6, 7, kPad, kPad}, {8, 9, 10, 4, 3}});
    const at::Tensor tgt_batch = ids({{2, 4, 5}, {2, 6, kPad}});
    CHECK(at::allclose(model->forward(batch, tgt_batch)[0], model->forward(unpadded, tgt)[0], 1e-5,
                       1e-6));
  }
}

TEST_CASE("decoder self-attention is causal", "[model]") {
  for (const auto& [name, o] : variants()) {
    INFO(name);
    Transformer model = make_model(o);
    const at::Tensor src = source();
    at::Tensor tgt = target();
    const at::Tensor before = model->forward(src, tgt);
    tgt[0][2] = 9;
    const at::Tensor after = model->forward(src, tgt);
    CHECK(at::allclose(before.slice(1, 0, 2), after.slice(1, 0, 2), 1e-5, 1e-6));
    CHECK_FALSE(at::allclose(before[0].slice(0, 2, 4), after[0].slice(0, 2, 4), 1e-3, 1e-4));
    CHECK(at::equal(before[1], after[1]));
  }
}

TEST_CASE("a padding mask never masks a whole row", "[model]") {
  const at::Tensor pad = at::tensor({0, 0, 1, 1, 1, 1}).to(at::kBool).view({2, 3});
  const at::Tensor mask = nmt::model::attention_mask_from_padding(pad);
  CHECK(mask.sizes() == at::IntArrayRef({2, 1, 1, 3}));
  CHECK(at::equal(mask[0].flatten(), at::tensor({1, 1, 0}).to(at::kBool)));
  // The all-padding row attends to everything rather than to nothing (NaN).
  CHECK(mask[1].all().item<bool>());
}

TEST_CASE("fully padded rows give finite logits and gradients", "[model]") {
  for (const auto& [name, o] : variants()) {
    INFO(name);
    Transformer model = make_model(o);
    model->train();
    const at::Tensor src = ids({{5, 6, 7}, {kPad, kPad, kPad}});
    const at::Tensor tgt = ids({{2, 4, 5}, {kPad, kPad, kPad}});
    const at::Tensor logits = model->forward(src, tgt);
    REQUIRE(all_finite(logits));
    // A loss over the real tokens only, as the training loss does.
    const at::Tensor keep = tgt.ne(kPad).unsqueeze(-1);
    (at::log_softmax(logits, -1) * keep).sum().backward();
    for (const auto& p : model->named_parameters()) {
      INFO(p.key());
      CHECK(all_finite(p.value().grad()));
    }
  }
}

TEST_CASE("incremental decoding matches full decoding, also after reorder_state", "[model]") {
  for (const auto& [name, o] : variants()) {
    INFO(name);
    Transformer model = make_model(o);
    const at::Tensor src = source();
    const at::Tensor tgt = ids({{2, 4, 5, 6, 3}, {2, 7, 8, 9, 10}});
    const EncoderOutput enc = model->encode(src);
    const at::Tensor full = model->decode(tgt, enc);

    DecoderState state = model->init_state(enc);
    for (int64_t t = 0; t < 3; ++t) {
      INFO("step " << t);
      const at::Tensor step = model->decode_step(tgt.select(1, t), state);
      CHECK(step.sizes() == at::IntArrayRef({2, kVocab}));
      CHECK(at::allclose(step, full.select(1, t), 1e-5, 1e-5));
    }
    CHECK(state.step == 3);

    // Beam-search style: row 1 is duplicated and row 0 dropped, then decoding continues.
    const at::Tensor order = at::tensor({1, 1}, at::kLong);
    model->reorder_state(state, order);
    at::Tensor tgt_reordered = tgt.index_select(0, order).clone();
    tgt_reordered[1][3] = 4;  // the two copies now diverge
    const at::Tensor full_reordered =
        model->decode(tgt_reordered, model->encode(src.index_select(0, order)));
    for (int64_t t = 3; t < 5; ++t) {
      INFO("step " << t << " after reorder");
      const at::Tensor step = model->decode_step(tgt_reordered.select(1, t), state);
      CHECK(at::allclose(step, full_reordered.select(1, t), 1e-5, 1e-5));
    }
  }
}

TEST_CASE("a state of several rows per source decodes as the sources copied into every row",
          "[model]") {
  // Beam search holds each sentence's encoder side once for its beam rows; the rows must see
  // exactly what rows of their own copy of the source would.
  constexpr int64_t kGroup = 3;
  for (const auto& [name, o] : variants()) {
    INFO(name);
    Transformer model = make_model(o);
    const at::Tensor src = source();
    const EncoderOutput enc = model->encode(src);
    const at::Tensor expand = at::tensor({0, 0, 0, 1, 1, 1}, at::kLong);
    EncoderOutput expanded = enc;
    expanded.out = enc.out.index_select(0, expand);
    expanded.src_pad_mask = enc.src_pad_mask.index_select(0, expand);
    DecoderState grouped = model->init_state(enc, kGroup);
    DecoderState copied = model->init_state(expanded);
    const at::Tensor tgt =
        ids({{2, 4, 5, 6}, {2, 7, 5, 6}, {2, 9, 9, 6}, {2, 7, 8, 9}, {2, 4, 8, 8}, {2, 10, 4, 5}});
    for (int64_t t = 0; t < 2; ++t) {
      INFO("step " << t);
      const at::Tensor a = model->decode_step(tgt.select(1, t), grouped);
      const at::Tensor b = model->decode_step(tgt.select(1, t), copied);
      CHECK(a.sizes() == at::IntArrayRef({2 * kGroup, kVocab}));
      CHECK(at::allclose(a, b, 1e-5, 1e-5));
    }
    // The first sentence leaves; the second's rows are shuffled within its group.
    const at::Tensor rows = at::tensor({5, 3, 3}, at::kLong);
    model->reorder_state(grouped, rows, at::tensor({1}, at::kLong));
    model->reorder_state(copied, rows);
    const at::Tensor tgt_rows = tgt.index_select(0, rows);
    for (int64_t t = 2; t < 4; ++t) {
      INFO("step " << t << " after reorder");
      const at::Tensor a = model->decode_step(tgt_rows.select(1, t), grouped);
      const at::Tensor b = model->decode_step(tgt_rows.select(1, t), copied);
      CHECK(a.sizes() == at::IntArrayRef({kGroup, kVocab}));
      CHECK(at::allclose(a, b, 1e-5, 1e-5));
    }
    CHECK_THROWS(model->reorder_state(grouped, rows));
    CHECK_THROWS(model->reorder_state(grouped, rows, at::tensor({0, 0}, at::kLong)));
  }
}

TEST_CASE("tied embeddings share one tensor, registered once", "[model]") {
  const auto storage = [](const at::Tensor& t) { return t.data_ptr(); };
  for (const auto& [name, o] : variants()) {
    INFO(name);
    Transformer model = make_model(o);
    std::set<const void*> seen;
    for (const at::Tensor& p : model->parameters()) CHECK(seen.insert(p.data_ptr()).second);
    const bool all = o.tie_embeddings == TiedEmbeddings::kAll;
    const bool decoder = o.tie_embeddings != TiedEmbeddings::kNone;
    CHECK((storage(model->source_embedding()) == storage(model->target_embedding())) == all);
    CHECK((storage(model->target_embedding()) == storage(model->output_weight())) == decoder);
  }
  // Gradients from the encoder input, decoder input and output layer meet in one tensor.
  Transformer model = make_model(tiny_options());
  model->forward(ids({{3}}), ids({{4}}))[0][0][5].backward();
  const at::Tensor grad = model->source_embedding().grad();
  CHECK(grad[3].abs().sum().item<double>() > 0);  // encoder input
  CHECK(grad[4].abs().sum().item<double>() > 0);  // decoder input
  CHECK(grad[5].abs().sum().item<double>() > 0);  // output row
}

TEST_CASE("tying all embeddings needs one vocabulary", "[model]") {
  ModelOptions o = tiny_options();
  CHECK_THROWS_MATCHES(
      Transformer(o, 11, 12, kPad), nmt::ConfigError,
      Catch::Matchers::Message("model.tie_embeddings = all needs one joint vocabulary: expected "
                               "equal source and target vocabulary sizes, found 11 and 12"));
  o.tie_embeddings = TiedEmbeddings::kDecoder;
  CHECK_NOTHROW(Transformer(o, 11, 12, kPad));
  o.heads = 5;
  CHECK_THROWS_AS(Transformer(o, 11, 12, kPad), nmt::ConfigError);
}

TEST_CASE("parameter_count matches a hand count", "[model]") {
  ModelOptions o = tiny_options();
  o.encoder_layers = 1;
  o.decoder_layers = 1;
  o.d_model = 8;
  o.heads = 2;
  o.ffn_dim = 16;
  // Attention: 4 projections of 8x8 + 8 bias = 288. LayerNorm: 8 + 8 = 16.
  // Feed-forward: 8*16 + 16 + 16*8 + 8 = 280.
  // Encoder layer: 288 + 16 + 280 + 16 = 600. Decoder layer: 2 * (288 + 16) + 280 + 16 = 904.
  SECTION("tie all, sinusoidal, post-norm: one 10x8 table") {
    CHECK(Transformer(o, 10, 10, kPad)->parameter_count() == 80 + 600 + 904);
  }
  SECTION("tie none, learned, pre-norm") {
    o.tie_embeddings = TiedEmbeddings::kNone;
    o.positions = PositionEncoding::kLearned;
    o.norm = NormPosition::kPre;
    o.max_positions = 20;
    // Tables 10x8 and 12x8, output 12x8 without bias, two 20x8 position tables and two
    // final LayerNorms.
    CHECK(Transformer(o, 10, 12, kPad)->parameter_count() ==
          80 + 96 + 96 + 2 * 160 + 600 + 904 + 2 * 16);
  }
}

TEST_CASE("initialization: fairseq embedding scale, zero pad row, seeded", "[model]") {
  ModelOptions o = tiny_options();
  o.d_model = 64;
  o.heads = 4;
  torch::manual_seed(1);
  Transformer model(o, 2000, 2000, kPad);
  const at::Tensor table = model->source_embedding();
  CHECK(table[kPad].abs().sum().item<double>() == 0.0);
  CHECK(table.std().item<double>() == Approx(1.0 / 8.0).epsilon(0.02));

  const auto same = [&](uint64_t a, uint64_t b) {
    Transformer x = make_model(tiny_options(), a);
    Transformer y = make_model(tiny_options(), b);
    const auto px = x->named_parameters();
    const auto py = y->named_parameters();
    REQUIRE(px.size() == py.size());
    for (size_t i = 0; i < px.size(); ++i) {
      if (!at::equal(px[i].value(), py[i].value())) return false;
    }
    return true;
  };
  CHECK(same(7, 7));
  CHECK_FALSE(same(7, 8));
}

TEST_CASE("sequences beyond max_positions are rejected", "[model]") {
  ModelOptions o = tiny_options();
  o.max_positions = 4;
  Transformer model = make_model(o);
  CHECK_THROWS_AS(model->encode(ids({{3, 4, 5, 6, 7}})), nmt::DataError);
  CHECK_NOTHROW(model->encode(ids({{3, 4, 5, 6}})));
}

TEST_CASE("on a GPU, bf16 autocast gives finite logits matching incremental decoding",
          "[model][cuda]") {
  if (!at::hasCUDA() || at::getNumGPUs() == 0) {
    NMT_SKIP_WITHOUT_CUDA("no CUDA device visible");
  }
  for (const auto& [name, o] : variants()) {
    INFO(name);
    Transformer model = make_model(o);
    model->to(at::kCUDA);
    const at::Tensor src = ids({{5, 6, 7}, {kPad, kPad, kPad}}).cuda();
    const at::Tensor tgt = ids({{2, 4, 5}, {kPad, kPad, kPad}}).cuda();
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    const EncoderOutput enc = model->encode(src);
    const at::Tensor full = model->decode(tgt, enc);
    DecoderState state = model->init_state(enc);
    at::Tensor steps = at::stack(
        {model->decode_step(tgt.select(1, 0), state), model->decode_step(tgt.select(1, 1), state),
         model->decode_step(tgt.select(1, 2), state)},
        1);
    at::autocast::set_autocast_enabled(at::kCUDA, false);
    at::autocast::clear_cache();
    CHECK(all_finite(full));
    CHECK(at::allclose(steps[0].to(at::kFloat), full[0].to(at::kFloat), 0.05, 0.05));
    model->train();
    const at::Tensor logits = model->forward(src, tgt);
    (at::log_softmax(logits, -1) * tgt.ne(kPad).unsqueeze(-1)).sum().backward();
    for (const at::Tensor& p : model->parameters()) CHECK(all_finite(p.grad()));
  }
}

TEST_CASE("marian positions: sines then cosines of t / 10000^(2i/d), from position 0", "[model]") {
  // d = 4: angles t and t / 100 (10000^(2/4)); columns sin t, sin t/100, cos t, cos t/100.
  const at::Tensor table = nmt::model::marian_positions(3, 4);
  REQUIRE(table.sizes() == at::IntArrayRef({3, 4}));
  CHECK(table.scalar_type() == at::kFloat);
  for (int64_t t = 0; t < 3; ++t) {
    INFO("position " << t);
    const double a = static_cast<double>(t), b = a / 100.0;
    const at::Tensor expected =
        at::tensor({std::sin(a), std::sin(b), std::cos(a), std::cos(b)}, at::kDouble)
            .to(at::kFloat);
    CHECK(at::allclose(table[t], expected, 0, 1e-7));
  }
  // An odd width has one sine more than cosines (transformers' sentinel ceil(d / 2)): d = 5,
  // angles t / 10000^(0, 2/5, 4/5).
  const at::Tensor odd = nmt::model::marian_positions(2, 5);
  REQUIRE(odd.sizes() == at::IntArrayRef({2, 5}));
  const double f1 = std::pow(10000.0, 0.4), f2 = std::pow(10000.0, 0.8);
  const at::Tensor row1 = at::tensor({std::sin(1.0), std::sin(1 / f1), std::sin(1 / f2),
                                      std::cos(1.0), std::cos(1 / f1)},
                                     at::kDouble)
                              .to(at::kFloat);
  CHECK(at::allclose(odd[1], row1, 0, 1e-7));
}

TEST_CASE("m2m100 positions: the sinusoidal table from row pad + 1, zero at padding", "[model]") {
  // d = 4: frequencies 1 and 10000^-1 (the fairseq table: ln(10000) / (d/2 - 1) apart).
  const at::Tensor table = nmt::model::m2m100_positions(/*max_positions=*/3, 4, /*pad_id=*/1);
  REQUIRE(table.sizes() == at::IntArrayRef({5, 4}));
  CHECK(at::equal(table[1], at::zeros({4})));
  for (int64_t r : {0, 2, 4}) {
    INFO("row " << r);
    const double a = static_cast<double>(r), b = a * 1e-4;
    const at::Tensor expected = at::tensor({std::sin(a), std::sin(b), std::cos(a), std::cos(b)});
    CHECK(at::allclose(table[r], expected.to(at::kFloat), 0, 1e-6));
  }
}

TEST_CASE("m2m100 position ids count real tokens from pad + 1, padding at pad", "[model]") {
  const at::Tensor rows = ids({{5, 6, 7, kPad, kPad}, {5, kPad, kPad, kPad, kPad}});
  CHECK(at::equal(nmt::model::m2m100_position_ids(rows, kPad, 0),
                  ids({{2, 3, 4, 1, 1}, {2, 1, 1, 1, 1}})));
  // One step of incremental decoding at position 3 (three tokens decoded before it).
  CHECK(at::equal(nmt::model::m2m100_position_ids(ids({{7}, {kPad}}), kPad, 3), ids({{5}, {1}})));
}

TEST_CASE("feed-forward activations: silu is x * sigmoid(x), gelu the erf form", "[model]") {
  for (const Activation activation : {Activation::kSilu, Activation::kGelu}) {
    ModelOptions o = tiny_options();
    o.activation = activation;
    nmt::model::FeedForward ffn{nmt::model::LayerOptions(o)};
    ffn->eval();
    torch::manual_seed(3);
    const at::Tensor x = at::randn({2, 3, o.d_model});
    const auto p = ffn->named_parameters();
    const at::Tensor h = at::linear(x, p["fc1.weight"], p["fc1.bias"]);
    const at::Tensor act = activation == Activation::kSilu
                               ? h * at::sigmoid(h)
                               : h * 0.5 * (1 + at::erf(h / std::sqrt(2.0)));
    const at::Tensor expected = at::linear(act, p["fc2.weight"], p["fc2.bias"]);
    CHECK(at::allclose(ffn(x), expected, 1e-6, 1e-6));
  }
}

TEST_CASE("the output bias is added to every position's logits", "[model]") {
  ModelOptions o = tiny_options();
  Transformer plain = make_model(o, 7);
  o.output_bias = true;
  Transformer biased = make_model(o, 7);
  REQUIRE(biased->output_bias().sizes() == at::IntArrayRef({kVocab}));
  CHECK(biased->parameter_count() == plain->parameter_count() + kVocab);
  const at::Tensor bias = at::randn({kVocab});
  {
    at::NoGradGuard no_grad;
    biased->output_bias().copy_(bias);
  }
  const at::Tensor src = source();
  const at::Tensor tgt = ids({{2, 4, 5}, {2, 7, 8}});
  CHECK(at::allclose(biased->forward(src, tgt), plain->forward(src, tgt) + bias, 1e-6, 1e-6));
}

TEST_CASE("the decoder start id is bos, eos or pad as the option says", "[model]") {
  CHECK(nmt::model::decoder_start_id(DecoderStart::kBos, 2, 3, 0) == 2);
  CHECK(nmt::model::decoder_start_id(DecoderStart::kEos, 2, 3, 0) == 3);
  CHECK(nmt::model::decoder_start_id(DecoderStart::kPad, 2, 3, 0) == 0);
  CHECK(ModelOptions{}.decoder_start == DecoderStart::kBos);  // today's behaviour by default
}
