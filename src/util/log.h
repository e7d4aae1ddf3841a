#pragma once
// Rank-aware logging. Messages start with a [component] tag: log::info("data", "{} pairs", n)
// prints "[data] 3200000 pairs". Info and below go to the console from rank 0 only; warnings
// and errors from every rank, prefixed with the rank. Every rank can also log to its own
// file in the run directory (add_file_sink).
//
// This header formats with fmt and hands a finished string to log.cpp, which owns spdlog, so
// that code compiled against LibTorch's bundled fmt never sees spdlog (see CMakeLists.txt).

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace nmt::log {

/// Severity, lowest first.
enum class Level { kTrace, kDebug, kInfo, kWarn, kError, kOff };

/// Logging settings (YAML section `log`; --log-level overrides `level`).
struct LogOptions {
  Level level = Level::kInfo;  ///< lowest level shown on the console and written to files
  bool to_file = true;         ///< each rank also writes <run_dir>/logs/rank<R>.log
};

/// The level names, lowest first: the one list that the config schema (log.level) and the
/// --log-level flags read.
std::vector<std::string> level_names();
/// Parses "trace|debug|info|warn|error|off"; returns false for anything else.
bool parse_level(std::string_view name, Level* level);
/// The name parse_level accepts for level.
std::string_view level_name(Level level);

/// (Re)configures the console logger for this process. Safe to call more than once. With
/// several ranks, lines carry "[rank R]" unless rank_tag is false (nmt-train's own launcher
/// already prefixes each worker's lines).
void init(const LogOptions& options, int rank = 0, int world_size = 1, bool rank_tag = true);
/// Adds a file sink (created with its parent folders); all levels >= options.level go there.
void add_file_sink(const std::filesystem::path& file);
/// Flushes and closes all sinks (files are flushed on every warning anyway).
void shutdown();
/// Rank and world size given to the last init() (0 and 1 before it).
int rank();
int world_size();
/// True when a message of this level would reach at least one sink.
bool enabled(Level level);
/// Writes a finished message; prefer the formatting helpers below.
void write(Level level, std::string_view component, std::string_view message);

template <class... Args>
void at(Level level, std::string_view component, fmt::format_string<Args...> format,
        Args&&... args) {
  if (enabled(level)) write(level, component, fmt::format(format, std::forward<Args>(args)...));
}
template <class... Args>
void debug(std::string_view component, fmt::format_string<Args...> format, Args&&... args) {
  at(Level::kDebug, component, format, std::forward<Args>(args)...);
}
template <class... Args>
void info(std::string_view component, fmt::format_string<Args...> format, Args&&... args) {
  at(Level::kInfo, component, format, std::forward<Args>(args)...);
}
template <class... Args>
void warn(std::string_view component, fmt::format_string<Args...> format, Args&&... args) {
  at(Level::kWarn, component, format, std::forward<Args>(args)...);
}
template <class... Args>
void error(std::string_view component, fmt::format_string<Args...> format, Args&&... args) {
  at(Level::kError, component, format, std::forward<Args>(args)...);
}

}  // namespace nmt::log
