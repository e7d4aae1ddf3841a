#pragma once
// The exit code of a command line that CLI11 did not accept, the same for every binary: the
// help text of each says "exit code 1" for errors while running and kUsageExitCode for a
// wrong command line. CLI11's own codes (105 for a failed check, 106 for a missing option,
// 109 for an extra argument, ...) say nothing a script can rely on across its versions.
// Included by the *_cli.cpp files only, which include CLI11 anyway.

#include <CLI/CLI.hpp>

namespace nmt::config {

/// Exit code of a wrong command line, as getopt- and argparse-based tools use.
inline constexpr int kUsageExitCode = 2;

/// The sentence of the help texts that says so.
inline constexpr const char* kExitCodesDoc =
    "Errors are reported as one line, with exit code 1 (2 for a wrong command line).";

/// Prints what CLI11 has for `error` (the help, the version or the error with a hint) and
/// returns the process's exit code: 0 for --help and --version, kUsageExitCode otherwise.
inline int usage_exit_code(const CLI::App& app, const CLI::ParseError& error) {
  return app.exit(error) == 0 ? 0 : kUsageExitCode;
}

}  // namespace nmt::config
