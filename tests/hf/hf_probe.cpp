// Test-only: runs our Transformer on a transformers model directory read through
// hf/hf_weights.h, for tests/scripts/test_hf_model.py to compare with transformers.
//
//   hf_probe HF_DIR INPUT.safetensors OUTPUT.safetensors MAX_NEW_TOKENS
//
// INPUT holds int64 "src" [N, S] and "tgt_in" [N, T], right-padded with the pad id. OUTPUT
// gets float32 "logits" [N, T, V] (teacher-forced decode), "step_logits" [N, T, V] (the same
// positions fed one at a time through init_state / decode_step), and int64 "greedy" [N, K]
// (our greedy search of each source, at most K = MAX_NEW_TOKENS tokens, then -1).

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/nn/module.h>

#include "checkpoint/checkpoint_file.h"
#include "hf/hf_weights.h"
#include "decode/search.h"
#include "model/transformer.h"
#include "util/error.h"

namespace {

using nmt::checkpoint::CheckpointData;

/// Builds our model from an imported directory, its parameters copied in as float32.
nmt::model::Transformer build_model(const nmt::hf::HfModel& hf) {
  const auto& c = hf.config;
  nmt::model::Transformer model(c.model, c.src_vocab_size, c.tgt_vocab_size, c.pad_id);
  at::NoGradGuard no_grad;
  for (const auto& item : model->named_parameters()) {
    const auto it = std::find_if(hf.tensors.begin(), hf.tensors.end(),
                                 [&](const auto& t) { return t.first == item.key(); });
    NMT_CHECK(it != hf.tensors.end(), nmt::CheckpointError, "no imported tensor {}", item.key());
    NMT_CHECK(it->second.sizes() == item.value().sizes(), nmt::CheckpointError,
              "{}: imported shape differs from the model's", item.key());
    item.value().copy_(it->second);
  }
  model->eval();
  return model;
}

/// Teacher-forced positions fed one by one through the decoder cache.
at::Tensor step_logits(nmt::model::TransformerImpl& model, const at::Tensor& src,
                       const at::Tensor& tgt_in) {
  nmt::model::DecoderState state = model.init_state(model.encode(src));
  std::vector<at::Tensor> steps;
  for (int64_t t = 0; t < tgt_in.size(1); ++t)
    steps.push_back(model.decode_step(tgt_in.select(1, t).contiguous(), state));
  return at::stack(steps, 1);
}

/// Our greedy outputs, -1 after each one's end.
at::Tensor greedy(nmt::model::TransformerImpl& model, const nmt::hf::HfModelConfig& c,
                  const at::Tensor& src, int64_t max_new_tokens) {
  nmt::decode::SearchOptions options;
  options.beam = 1;
  options.max_len_a = 0;
  options.max_len_b = max_new_tokens;
  // The search never generates pad and bos; a config without a distinct bos names pad twice.
  const int64_t bos = c.bos_id >= 0 && c.bos_id != c.eos_id ? c.bos_id : c.pad_id;
  const auto found =
      nmt::decode::search(model, src, {c.decoder_start_id, bos, c.eos_id, c.pad_id}, options);
  at::Tensor out = at::full({src.size(0), max_new_tokens}, -1, at::kLong);
  for (size_t row = 0; row < found.size(); ++row) {
    const auto& tokens = found[row].front().tokens;
    for (size_t k = 0; k < tokens.size(); ++k)
      out[static_cast<int64_t>(row)][static_cast<int64_t>(k)] = tokens[k];
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: hf_probe HF_DIR INPUT.safetensors OUTPUT.safetensors K\n");
    return 2;
  }
  try {
    at::set_num_threads(1);
    const nmt::hf::HfModel hf = nmt::hf::read_hf_model(argv[1]);
    nmt::model::Transformer model = build_model(hf);
    const CheckpointData input = nmt::checkpoint::load_safetensors(argv[2]);
    const at::Tensor src = input.at("src");
    const at::Tensor tgt_in = input.at("tgt_in");
    c10::InferenceMode inference;
    CheckpointData output;
    output.tensors.emplace_back("logits", model->forward(src, tgt_in));
    output.tensors.emplace_back("step_logits", step_logits(*model, src, tgt_in));
    output.tensors.emplace_back("greedy", greedy(*model, hf.config, src, std::stoll(argv[4])));
    nmt::checkpoint::save_checkpoint(argv[3], output);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hf_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
