#pragma once
// What a command that writes an output (and replaces it with --force) may touch: it deletes only
// what it can prove it wrote itself, and never an output that is, holds or lies inside what it
// reads. export-hf and import-hf decide with these; scripts/nmt_tools/output_guard.py is the
// same rules in Python, for scripts/export-ctranslate2.py.
//
//   real_path             the path with every symlink resolved (of the part that exists; the
//                         rest normalized), so "runs/demo/.", a link to runs/ or "a/../b" name
//                         the folder they reach
//   check_output_apart    OUT is IN, holds IN or lies inside IN (by real path): refused, always
//   check_replaceable_dir OUT absent: fine; present: only with force, and only when it is an
//                         empty directory or one that holds the writer's marker file (which the
//                         writer puts into every output it makes); a link, a file or any other
//                         directory is refused
//
// The messages name the paths as the caller passes them, and say what to do instead.

#include <filesystem>
#include <string_view>

namespace nmt {

/// `path` absolute, with the symlinks of its existing part resolved and the rest normalized
/// (std::filesystem::weakly_canonical of the absolute path); "out/" is "out".
std::filesystem::path real_path(const std::filesystem::path& path);

/// True when `inner` is `outer` or lies inside it, compared by real path.
bool path_within(const std::filesystem::path& inner, const std::filesystem::path& outer);

/// Throws ConfigError when `output` is `input`, holds it or lies inside it (real paths):
/// writing `output` would overwrite, and replacing it delete, what the command reads.
/// `input_name` says what `input` is in the message ("the checkpoint", "HF_DIR").
void check_output_apart(const std::filesystem::path& output, const std::filesystem::path& input,
                        std::string_view input_name);

/// True when `dir` holds the file `marker` (a regular file, not a link) at its top.
bool holds_marker(const std::filesystem::path& dir, std::string_view marker);

/// Throws ConfigError unless the directory `dir` may be written: it does not exist; or `force`
/// is set and it is a directory (not a symlink) that is empty or holds_marker(dir, marker).
/// `writer` names who writes the marker in the message ("export-hf").
void check_replaceable_dir(const std::filesystem::path& dir, std::string_view marker,
                           std::string_view writer, bool force);

}  // namespace nmt
