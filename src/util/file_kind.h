#pragma once
// What kind of file a path names, for readers that must not block on one that is not a regular
// file: opening a FIFO for reading waits for a writer, so a model directory with a FIFO where
// config.json or a weights file should be would hang the import instead of failing.

#include <filesystem>
#include <string>

namespace nmt {

/// "" when `file` is a regular file (a symbolic link to one too, as the hub's cache has them)
/// or does not exist; else what it is ("a FIFO", "a directory", "a socket", "a device",
/// "a broken link", "another kind of file"), for a message that says why it is refused.
std::string not_regular_file(const std::filesystem::path& file);

}  // namespace nmt
