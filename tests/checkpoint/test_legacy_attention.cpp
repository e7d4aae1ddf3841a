// checkpoint/legacy_attention: separate q/k/v tensors of checkpoints written before the fused
// attention projections become the fused ones, in every group, in place, in order.
#include "catch_torch.h"  // first: see the header

#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "checkpoint/legacy_attention.h"
#include "util/error.h"

using nmt::checkpoint::NamedTensors;

namespace {

std::vector<std::string> names(const NamedTensors& tensors) {
  std::vector<std::string> out;
  for (const auto& entry : tensors) out.push_back(entry.first);
  return out;
}

const at::Tensor& find(const NamedTensors& tensors, const std::string& name) {
  for (const auto& entry : tensors)
    if (entry.first == name) return entry.second;
  FAIL("no tensor " << name);
  throw;
}

}  // namespace

TEST_CASE("legacy attention tensors are fused in every group, in place", "[checkpoint]") {
  const at::Tensor q = at::full({2, 2}, 1.0f), k = at::full({2, 2}, 2.0f),
                   v = at::full({2, 2}, 3.0f), bias = at::arange(2, at::kFloat);
  NamedTensors tensors;
  for (const std::string head : {"model.", "ema.", "optim.exp_avg."}) {
    for (const std::string attn : {"encoder_layers.0.self_attn", "decoder_layers.1.cross_attn"}) {
      tensors.emplace_back(head + attn + ".q_proj.weight", q);
      tensors.emplace_back(head + attn + ".q_proj.bias", bias);
      tensors.emplace_back(head + attn + ".k_proj.weight", k);
      tensors.emplace_back(head + attn + ".k_proj.bias", bias + 2);
      tensors.emplace_back(head + attn + ".v_proj.weight", v);
      tensors.emplace_back(head + attn + ".v_proj.bias", bias + 4);
      tensors.emplace_back(head + attn + ".out_proj.weight", q);
    }
  }
  // Adam's per-parameter step count: a 0-dim tensor, the same for the parts.
  for (const std::string part : {"q", "k", "v"})
    tensors.emplace_back("optim.step.encoder_layers.0.self_attn." + part + "_proj.weight",
                         at::scalar_tensor(3.0f));
  tensors.emplace_back("model.ffn.fc1.weight", q);

  CHECK(nmt::checkpoint::fuse_legacy_attention(tensors, "old.safetensors") == 3 * 6 + 2);
  const std::vector<std::string> expected_head = {
      "model.encoder_layers.0.self_attn.qkv_proj.weight",
      "model.encoder_layers.0.self_attn.qkv_proj.bias",
      "model.encoder_layers.0.self_attn.out_proj.weight",
      "model.decoder_layers.1.cross_attn.q_proj.weight",
      "model.decoder_layers.1.cross_attn.q_proj.bias",
      "model.decoder_layers.1.cross_attn.kv_proj.weight",
      "model.decoder_layers.1.cross_attn.kv_proj.bias",
      "model.decoder_layers.1.cross_attn.out_proj.weight"};
  const std::vector<std::string> got = names(tensors);
  REQUIRE(got.size() == 3 * expected_head.size() + 2);
  CHECK(std::vector<std::string>(got.begin(), got.begin() + 8) == expected_head);
  CHECK(got[8] == "ema.encoder_layers.0.self_attn.qkv_proj.weight");
  CHECK(got[16] == "optim.exp_avg.encoder_layers.0.self_attn.qkv_proj.weight");
  CHECK(got.back() == "model.ffn.fc1.weight");
  CHECK(got[got.size() - 2] == "optim.step.encoder_layers.0.self_attn.qkv_proj.weight");

  CHECK(at::equal(find(tensors, "ema.encoder_layers.0.self_attn.qkv_proj.weight"),
                  at::cat({q, k, v}, 0)));
  CHECK(at::equal(find(tensors, "model.encoder_layers.0.self_attn.qkv_proj.bias"),
                  at::arange(6, at::kFloat)));
  CHECK(at::equal(find(tensors, "optim.exp_avg.decoder_layers.1.cross_attn.kv_proj.weight"),
                  at::cat({k, v}, 0)));
  CHECK(at::equal(find(tensors, "model.decoder_layers.1.cross_attn.q_proj.weight"), q));
  const at::Tensor& step = find(tensors, "optim.step.encoder_layers.0.self_attn.qkv_proj.weight");
  CHECK(step.dim() == 0);
  CHECK(step.item<float>() == 3.0f);

  // Fused already: nothing changes.
  const std::vector<std::string> before = names(tensors);
  CHECK(nmt::checkpoint::fuse_legacy_attention(tensors, "new.safetensors") == 0);
  CHECK(names(tensors) == before);
}

TEST_CASE("a legacy attention with a part missing is an error naming it", "[checkpoint]") {
  NamedTensors tensors;
  tensors.emplace_back("model.encoder_layers.0.self_attn.q_proj.weight", at::ones({2, 2}));
  tensors.emplace_back("model.encoder_layers.0.self_attn.k_proj.weight", at::ones({2, 2}));
  CHECK_THROWS_WITH(nmt::checkpoint::fuse_legacy_attention(tensors, "old.safetensors"),
                    Catch::Contains("old.safetensors") && Catch::Contains("v_proj") &&
                        Catch::Contains("self_attn.qkv_proj.weight"));
}
