#pragma once
// Content hashes of files, for cache keys: XXH3-64 (libxxhash), which reads as fast as the
// disk or page cache delivers (the byte-at-a-time FNV-1a it replaced took 14 s on the 3.4 GB
// of a 20M-pair corpus), and a memo keyed by what stat() says, so that a rank, a restart or
// a resume does not read a corpus of many gigabytes again only to learn it is unchanged.
//
//   const uint64_t h = hash_file_remembered(corpus, run_dir / "cache");  // reads it once

#include <cstdint>
#include <filesystem>
#include <string>

namespace nmt::data {

/// XXH3-64 of a file's bytes; throws DataError when it cannot be read. Logs progress with an
/// ETA every 10 s on large files.
uint64_t hash_file(const std::filesystem::path& file);
/// hash_file as 16 hex digits.
std::string hash_file_hex(const std::filesystem::path& file);

/// hash_file, remembered in `memo_dir`/file-hashes.json with the file's size, modification
/// time (nanoseconds), inode and device: while all four are what they were, the remembered
/// hash is returned without reading the file. A file rewritten in place keeping its size and
/// its modification time to the nanosecond is not noticed (as make and rsync do not notice
/// it); a file modified less than 2 s before it is read is not remembered (a write in the
/// same tick of the file system's clock could follow unseen). Deleting the memo (or the
/// cache folder) makes every file read again. A memo that cannot be read or written costs
/// only the reading: it is never an error.
uint64_t hash_file_remembered(const std::filesystem::path& file,
                              const std::filesystem::path& memo_dir);

}  // namespace nmt::data
