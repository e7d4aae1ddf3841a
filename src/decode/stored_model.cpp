#include "decode/stored_model.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "checkpoint/tensor_groups.h"
#include "util/error.h"

namespace nmt::decode {

using checkpoint::TensorGroup;

TensorGroup weights_group(const std::vector<std::string>& tensor_names, WeightsChoice choice,
                          const std::string& name) {
  const bool has_ema =
      std::any_of(tensor_names.begin(), tensor_names.end(),
                  [](const std::string& n) { return checkpoint::in_group(TensorGroup::kEma, n); });
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

StoredWeights load_stored_weights(const std::filesystem::path& file, WeightsChoice choice) {
  StoredWeights stored;
  stored.group =
      weights_group(checkpoint::read_checkpoint_tensor_names(file), choice, file.string());
  stored.data = checkpoint::map_checkpoint(file, [group = stored.group](std::string_view n) {
    return checkpoint::in_group(group, n) || checkpoint::in_group(TensorGroup::kVocabulary, n);
  });
  // The header was read twice: a file replaced in between (a run saving there) is refused
  // rather than translated with another group than the one chosen.
  NMT_CHECK(checkpoint::has_group(stored.data, stored.group), CheckpointError,
            "{}: no {}* tensors (was it replaced while it was read? try again)", file.string(),
            checkpoint::group_prefix(stored.group));
  return stored;
}

data::Vocab stored_vocabulary(const checkpoint::CheckpointData& data, std::string_view file,
                              const std::string& name) {
  const std::string tensor = checkpoint::tensor_name(TensorGroup::kVocabulary, file);
  return data::Vocab::from_serialized(
      checkpoint::tensor_bytes(checkpoint::tensor_at(data, TensorGroup::kVocabulary, file)),
      fmt::format("{} ({})", name, tensor));
}

}  // namespace nmt::decode
