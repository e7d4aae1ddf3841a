#pragma once
// Content hashes of files, for cache keys and fingerprints.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "util/hash.h"

namespace nmt::data {

/// The hash of util/hash.h, where keys and fingerprints hash bytes.
using Fnv1a64 = nmt::Fnv1a64;

/// FNV-1a 64 of a file's bytes; throws DataError when it cannot be read.
uint64_t hash_file(const std::filesystem::path& file);
/// hash_file as 16 hex digits.
std::string hash_file_hex(const std::filesystem::path& file);

}  // namespace nmt::data
