#include "decode/stored_model.h"

#include <fmt/format.h>

#include "checkpoint/tensor_groups.h"
#include "util/error.h"

namespace nmt::decode {

using checkpoint::TensorGroup;

TensorGroup weights_group(const checkpoint::CheckpointData& data, WeightsChoice choice,
                          const std::string& name) {
  const bool has_ema = checkpoint::has_group(data, TensorGroup::kEma);
  switch (choice) {
    case WeightsChoice::kRaw:
      return TensorGroup::kModel;
    case WeightsChoice::kEma:
      NMT_CHECK(has_ema, CheckpointError,
                "--weights ema: {} has no {}* tensors (it was trained without "
                "train.ema_decay); use --weights raw",
                name, checkpoint::group_prefix(TensorGroup::kEma));
      return TensorGroup::kEma;
    case WeightsChoice::kAuto:
      break;
  }
  return has_ema ? TensorGroup::kEma : TensorGroup::kModel;
}

data::Vocab stored_vocabulary(const checkpoint::CheckpointData& data, std::string_view file,
                              const std::string& name) {
  const std::string tensor = checkpoint::tensor_name(TensorGroup::kVocabulary, file);
  return data::Vocab::from_serialized(
      checkpoint::tensor_bytes(checkpoint::tensor_at(data, TensorGroup::kVocabulary, file)),
      fmt::format("{} ({})", name, tensor));
}

}  // namespace nmt::decode
