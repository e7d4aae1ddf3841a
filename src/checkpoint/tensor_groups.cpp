#include "checkpoint/tensor_groups.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include <ATen/ATen.h>

#include "util/error.h"
#include "util/json_text.h"

namespace nmt::checkpoint {

void add_tensors(CheckpointData& data, TensorGroup group, NamedTensors tensors) {
  data.tensors.reserve(data.tensors.size() + tensors.size());
  for (auto& [name, tensor] : tensors)
    data.tensors.emplace_back(tensor_name(group, name), std::move(tensor));
}

void add_tensor(CheckpointData& data, TensorGroup group, std::string_view name, at::Tensor tensor) {
  data.tensors.emplace_back(tensor_name(group, name), std::move(tensor));
}

NamedTensors group_tensors(const CheckpointData& data, TensorGroup group) {
  NamedTensors out;
  for (const auto& [name, tensor] : data.tensors)
    if (in_group(group, name)) out.emplace_back(std::string(name_in_group(group, name)), tensor);
  return out;
}

bool has_group(const CheckpointData& data, TensorGroup group) {
  for (const auto& entry : data.tensors)
    if (in_group(group, entry.first)) return true;
  return false;
}

const at::Tensor* find_tensor(const CheckpointData& data, TensorGroup group, std::string_view name) {
  const std::string_view prefix = group_prefix(group);
  for (const auto& [full, tensor] : data.tensors) {
    if (full.size() == prefix.size() + name.size() && in_group(group, full) &&
        name_in_group(group, full) == name)
      return &tensor;
  }
  return nullptr;
}

const at::Tensor& tensor_at(const CheckpointData& data, TensorGroup group, std::string_view name) {
  return data.at(tensor_name(group, name));
}

TensorFinder group_finder(const CheckpointData& data, TensorGroup group) {
  return [&data, group](std::string_view name) { return find_tensor(data, group, name); };
}

std::string tensor_layout_json() {
  using Json = nlohmann::ordered_json;
  Json groups = Json::array();
  for (const TensorGroupInfo& info : kTensorGroups)
    groups.push_back({{"name", info.name}, {"prefix", info.prefix}, {"contents", info.contents}});
  const auto strings = [](const auto& names) {
    return std::vector<std::string>(names.begin(), names.end());
  };
  namespace proj = attention_projection;
  Json out;
  out["groups"] = groups;
  out["attention_projections"] = {{"self_attention", proj::kSelfAttention},
                                  {"cross_attention", proj::kCrossAttention},
                                  {"query_key_value", proj::kQueryKeyValue},
                                  {"query", proj::kQuery},
                                  {"key_value", proj::kKeyValue},
                                  {"output", proj::kOutput}};
  out["optimizer_slots"] = strings(optimizer_slot::kAll);
  out["optimizer_name"] = optimizer_slot::name("<slot>", "<parameter>");
  out["scaler_fields"] = strings(scaler_field::kAll);
  out["rng_name"] = "<kind>.<rank>";  // rng_stream::name (a unit test checks they agree)
  out["vocabulary_files"] = {vocabulary_file::kSource, vocabulary_file::kTarget};
  return json::pretty(out);
}

at::Tensor bytes_tensor(std::string_view bytes) {
  at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

std::string tensor_bytes(const at::Tensor& tensor) {
  const at::Tensor bytes = tensor.to(at::kCPU, at::kByte).contiguous();
  return std::string(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()),
                     static_cast<size_t>(bytes.numel()));
}

at::Tensor file_bytes_tensor(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  NMT_CHECK(in.good(), CheckpointError, "{}: cannot read", file.string());
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  NMT_CHECK(!in.bad(), CheckpointError, "{}: read failed", file.string());
  return bytes_tensor(bytes);
}

}  // namespace nmt::checkpoint
