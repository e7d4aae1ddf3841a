#include "hf/hf_weight_files.h"

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_file.h"
#include "util/error.h"
#include "util/file_kind.h"

namespace nmt::hf {

using checkpoint::CheckpointData;
using checkpoint::map_safetensors;
using checkpoint::NamedTensors;

namespace {

/// The index's weight_map: the shard file of each tensor.
std::map<std::string, std::string> weight_map(const std::filesystem::path& index) {
  const std::string kind = not_regular_file(index);
  NMT_CHECK(kind.empty(), CheckpointError, "{}: not a regular file ({}): refused rather than read",
            index.string(), kind);
  std::ifstream in(index);
  NMT_CHECK(in.good(), CheckpointError, "{}: cannot read", index.string());
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    NMT_THROW(CheckpointError, "{}: not valid JSON: {}", index.string(), e.what());
  }
  NMT_CHECK(json.is_object() && json.contains("weight_map") && json.at("weight_map").is_object(),
            CheckpointError, "{}: key \"weight_map\": expected {{tensor: shard file}}",
            index.string());
  std::map<std::string, std::string> map;
  for (const auto& [name, file] : json.at("weight_map").items()) {
    NMT_CHECK(file.is_string(), CheckpointError,
              "{}: key \"weight_map.{}\" is {}, expected a shard file name", index.string(), name,
              file.dump());
    const std::string shard = file.get<std::string>();
    NMT_CHECK(!shard.empty() && std::filesystem::path(shard).filename() == shard && shard != "." &&
                  shard != "..",
              CheckpointError,
              "{}: key \"weight_map.{}\": shard {} is not a file name in the directory",
              index.string(), name, shard);
    map.emplace(name, shard);
  }
  NMT_CHECK(!map.empty(), CheckpointError, "{}: key \"weight_map\" maps no tensor", index.string());
  return map;
}

/// The shards' tensors, each from the shard the map names, each mapped tensor once.
NamedTensors read_shards(const std::filesystem::path& dir, const std::filesystem::path& index) {
  const std::map<std::string, std::string> map = weight_map(index);
  std::map<std::string, std::string> shards_left;  // shard -> a tensor it must hold
  for (const auto& [name, shard] : map) shards_left.emplace(shard, name);
  std::map<std::string, std::string> found_in;  // tensor -> the shard it was read from
  NamedTensors out;
  for (const auto& [shard, first] : shards_left) {
    CheckpointData part = map_safetensors(dir / shard);
    for (auto& [name, tensor] : part.tensors) {
      const auto seen = found_in.find(name);
      NMT_CHECK(seen == found_in.end(), CheckpointError,
                "{}: tensor {} is in two shards, {} and {}: refused (which one is the model's?)",
                index.string(), name, seen == found_in.end() ? "" : seen->second, shard);
      const auto mapped = map.find(name);
      NMT_CHECK(mapped != map.end(), CheckpointError,
                "{}: shard {} holds {}, which key \"weight_map\" does not name", index.string(),
                shard, name);
      NMT_CHECK(mapped->second == shard, CheckpointError,
                "{}: shard {} holds {}, which key \"weight_map\" puts in {}", index.string(), shard,
                name, mapped->second);
      found_in.emplace(name, shard);
      out.emplace_back(name, std::move(tensor));
    }
  }
  for (const auto& [name, shard] : map) {
    NMT_CHECK(found_in.count(name), CheckpointError,
              "{}: key \"weight_map\" puts {} in {}, which does not hold it", index.string(), name,
              shard);
  }
  return out;
}

}  // namespace

NamedTensors read_hf_weight_files(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  const fs::path single = dir / kHfWeightsFile;
  const fs::path index = dir / kHfWeightsIndex;
  std::error_code ec;
  if (fs::exists(fs::symlink_status(single, ec))) return map_safetensors(single).tensors;
  if (fs::exists(fs::symlink_status(index, ec))) return read_shards(dir, index);
  NMT_CHECK(!fs::exists(dir / "pytorch_model.bin"), CheckpointError,
            "{}: only pytorch_model.bin, a pickle, which nmt-train does not load; write "
            "safetensors with transformers: model.save_pretrained(dir, safe_serialization=True)",
            dir.string());
  NMT_THROW(CheckpointError, "{}: no {} (nor {})", dir.string(), kHfWeightsFile, kHfWeightsIndex);
}

}  // namespace nmt::hf
