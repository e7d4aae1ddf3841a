#pragma once
// Small helpers shared by the checkpoint tests (include after catch_torch.h).

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "checkpoint/checkpoint_file.h"

namespace nmt::test {

/// A checkpoint with a model tensor, an optimizer tensor and the given metadata.
inline checkpoint::CheckpointData small_checkpoint(
    float value, std::map<std::string, std::string> metadata = {}) {
  checkpoint::CheckpointData data;
  data.tensors.emplace_back("model.weight", at::full({2, 3}, value, at::kFloat));
  data.tensors.emplace_back("optimizer.exp_avg", at::full({2, 3}, value / 2, at::kFloat));
  data.metadata = std::move(metadata);
  return data;
}

/// Cuts a file down to its first `size` bytes.
inline void truncate_file(const std::filesystem::path& file, uintmax_t size) {
  std::filesystem::resize_file(file, size);
}

/// XORs one byte of a file with 0xFF.
inline void flip_byte(const std::filesystem::path& file, std::streamoff offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.get(c);
  f.seekp(offset);
  f.put(static_cast<char>(c ^ 0xFF));
}

/// Files in a folder, by name.
inline std::vector<std::string> file_names(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace nmt::test
