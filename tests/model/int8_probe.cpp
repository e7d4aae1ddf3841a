// Test-only: the int8 codes and scales that training with train.quantize: int8 computes with,
// for tests/scripts/test_qat_int8.py to compare with CTranslate2's int8 conversion of the same
// checkpoint (scripts/export-ctranslate2.py --quantization int8).
//
//   int8_probe CHECKPOINT OUTPUT.safetensors
//
// OUTPUT gets, for every two-dimensional tensor of the checkpoint's model group, "<name>.codes"
// (int8, its shape) and "<name>.scales" (float32 [rows]) from model::quantize_int8_rows, the
// function the model's forward fake-quantizes with.

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include <ATen/ATen.h>

#include "checkpoint/checkpoint_file.h"
#include "model/fake_quantization.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: int8_probe CHECKPOINT OUTPUT.safetensors\n");
    return 2;
  }
  try {
    const nmt::checkpoint::CheckpointData checkpoint = nmt::checkpoint::load_checkpoint(
        argv[1], [](std::string_view name) { return name.rfind("model.", 0) == 0; });
    nmt::checkpoint::CheckpointData output;
    for (const auto& [name, tensor] : checkpoint.tensors) {
      if (tensor.dim() != 2 || !tensor.is_floating_point()) continue;
      const nmt::model::Int8Rows q = nmt::model::quantize_int8_rows(tensor);
      output.tensors.emplace_back(name + ".codes", q.codes);
      output.tensors.emplace_back(name + ".scales", q.scales);
    }
    nmt::checkpoint::save_checkpoint(argv[2], output);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "int8_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
