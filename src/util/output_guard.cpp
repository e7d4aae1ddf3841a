#include "util/output_guard.h"

#include <algorithm>

#include "util/error.h"

namespace nmt {

namespace fs = std::filesystem;

fs::path real_path(const fs::path& path) {
  fs::path real = fs::weakly_canonical(fs::absolute(path));
  if (!real.has_filename() && real.has_relative_path()) real = real.parent_path();  // "out/"
  return real;
}

bool path_within(const fs::path& inner, const fs::path& outer) {
  const fs::path in = real_path(inner);
  const fs::path out = real_path(outer);
  const auto [end, at] = std::mismatch(out.begin(), out.end(), in.begin(), in.end());
  return end == out.end();
}

void check_output_apart(const fs::path& output, const fs::path& input,
                        std::string_view input_name) {
  const fs::path real = real_path(input);
  const std::string shown = real == fs::absolute(input).lexically_normal()
                                ? input.string()
                                : fmt::format("{} ({})", input.string(), real.string());
  const auto refuse = [&](std::string_view how) {
    NMT_THROW(ConfigError,
              "{}: the output {} {} {}, which the command reads; give a folder or file apart "
              "from it",
              output.string(), how, input_name, shown);
  };
  if (real_path(output) == real_path(input)) refuse("is");
  if (path_within(input, output)) refuse("holds");
  if (path_within(output, input)) refuse("lies inside");
}

bool holds_marker(const fs::path& dir, std::string_view marker) {
  std::error_code ec;
  return fs::is_regular_file(fs::symlink_status(dir / marker, ec));
}

void check_replaceable_dir(const fs::path& dir, std::string_view marker, std::string_view writer,
                           bool force) {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(dir, ec);
  if (!fs::exists(status)) return;
  NMT_CHECK(force, ConfigError,
            "{} exists: give another output directory, or --force to replace it", dir.string());
  NMT_CHECK(fs::is_directory(status), ConfigError,
            "{} exists and is not a directory{}: --force replaces only an empty directory or one "
            "that {} wrote; give another output directory",
            dir.string(), fs::is_symlink(status) ? " (a symbolic link)" : "", writer);
  NMT_CHECK(fs::is_empty(dir) || holds_marker(dir, marker), ConfigError,
            "{} is not empty and was not written by {} (no {} in it): --force replaces only an "
            "empty directory or one that {} wrote; give another output directory, or remove "
            "this one yourself",
            dir.string(), writer, marker, writer);
}

}  // namespace nmt
