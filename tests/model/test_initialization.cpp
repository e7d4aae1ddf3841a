#include "catch_torch.h"  // first: see the header

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "model/initialization.h"
#include "model/transformer.h"

using nmt::model::ModelOptions;
using nmt::model::Transformer;

namespace {

constexpr int64_t kPad = 1;

/// Every parameter kind a model can have: untied tables and output projection, learned
/// positions, an output bias; and the default (tied, sinusoidal) model.
std::vector<ModelOptions> variants() {
  ModelOptions tied;
  tied.encoder_layers = tied.decoder_layers = 2;
  tied.d_model = 16;
  tied.heads = 4;
  tied.ffn_dim = 32;
  tied.max_positions = 32;
  ModelOptions untied = tied;
  untied.norm = nmt::model::NormPosition::kPre;
  untied.positions = nmt::model::PositionEncoding::kLearned;
  untied.tie_embeddings = nmt::model::TiedEmbeddings::kNone;
  untied.output_bias = true;
  return {tied, untied};
}

}  // namespace

TEST_CASE("initialization: a model built to be loaded draws nothing and loads to the same model",
          "[model][initialization]") {
  for (const ModelOptions& options : variants()) {
    CAPTURE(options.tie_embeddings == nmt::model::TiedEmbeddings::kNone);
    torch::manual_seed(5);
    // Untied, the target vocabulary has a size of its own.
    const int64_t tgt_vocab = options.tie_embeddings == nmt::model::TiedEmbeddings::kNone ? 17 : 13;
    Transformer initialized(options, 13, tgt_vocab, kPad);
    initialized->eval();
    torch::manual_seed(9);
    const at::Tensor expected = at::rand({4});
    torch::manual_seed(9);
    Transformer loaded(nullptr);
    {
      const nmt::model::SkipInitialization skip;
      CHECK_FALSE(nmt::model::initializing());
      { const nmt::model::SkipInitialization nested; }
      CHECK_FALSE(nmt::model::initializing());  // a nested scope restores, not resets
      loaded = Transformer(options, 13, tgt_vocab, kPad);
    }
    CHECK(nmt::model::initializing());
    CHECK(at::equal(at::rand({4}), expected));  // the generator did not move
    // The same parameters, by name and shape; copied in, the same outputs.
    const auto theirs = initialized->named_parameters();
    const auto ours = loaded->named_parameters();
    REQUIRE(ours.size() == theirs.size());
    {
      at::NoGradGuard no_grad;
      for (size_t i = 0; i < ours.size(); ++i) {
        CHECK(ours[i].key() == theirs[i].key());
        REQUIRE(ours[i].value().sizes() == theirs[i].value().sizes());
        ours[i].value().copy_(theirs[i].value());
      }
    }
    loaded->eval();
    const at::Tensor src = at::tensor({2, 3, 4, 5}, at::kLong).view({1, 4});
    const at::Tensor tgt = at::tensor({0, 6, 7}, at::kLong).view({1, 3});
    CHECK(at::equal(loaded->forward(src, tgt), initialized->forward(src, tgt)));
  }
}

TEST_CASE("initialization: parameters get new memory without a copy, tied ones stay tied",
          "[model][initialization]") {
  for (const ModelOptions& options : variants()) {
    const bool untied = options.tie_embeddings == nmt::model::TiedEmbeddings::kNone;
    CAPTURE(untied);
    Transformer model(nullptr);
    {
      const nmt::model::SkipInitialization skip;
      model = Transformer(options, 13, untied ? 17 : 13, kPad);
    }
    const auto before = model->named_parameters();
    std::vector<const void*> old_memory;
    for (const auto& item : before) old_memory.push_back(item.value().data_ptr());
    nmt::model::allocate_parameters_on(*model, at::Device(at::kCPU));
    const auto after = model->named_parameters();
    REQUIRE(after.size() == before.size());
    for (size_t i = 0; i < after.size(); ++i) {
      CHECK(after[i].key() == before[i].key());
      CHECK(after[i].value().sizes() == before[i].value().sizes());
      CHECK(after[i].value().requires_grad());
      CHECK(after[i].value().data_ptr() != old_memory[i]);
    }
    if (!untied) {
      // The tied tables (and so the output projection) are one tensor still.
      CHECK(model->target_embedding().data_ptr() == model->source_embedding().data_ptr());
      CHECK(model->output_weight().data_ptr() == model->source_embedding().data_ptr());
    }
  }
}
