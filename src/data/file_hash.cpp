#include "data/file_hash.h"

#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "util/error.h"

namespace nmt::data {

void Fnv1a64::update(const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t h = state_;
  for (size_t i = 0; i < size; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  state_ = h;
}

uint64_t hash_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  NMT_CHECK(in.good(), DataError, "{}: cannot read", file.string());
  Fnv1a64 hash;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    hash.update(buffer.data(), static_cast<size_t>(in.gcount()));
  }
  return hash.digest();
}

std::string hash_file_hex(const std::filesystem::path& file) {
  return fmt::format("{:016x}", hash_file(file));
}

}  // namespace nmt::data
