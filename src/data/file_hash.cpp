#include "data/file_hash.h"

#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "util/error.h"

namespace nmt::data {

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
