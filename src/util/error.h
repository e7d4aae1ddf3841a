#pragma once
// The error types of nmt-train. Code below apps/ reports every failure by throwing one of
// these; each app's main turns it into one clear line and a non-zero exit (see main_guard.h).

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace nmt {

/// Where in our source an error was raised; shown only at debug log level, since users act
/// on the message, not on our line numbers.
struct SourceLocation {
  const char* file = nullptr;  ///< __FILE__ of the check, or nullptr when unknown
  int line = 0;                ///< __LINE__ of the check
};

/// Base of all nmt-train errors: a message that says what is wrong and where in the user's
/// input (file:line, key, rank), expected versus found.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, SourceLocation where = {})
      : std::runtime_error(message), where_(where) {}
  /// Source location of the check that raised it (file may be null).
  const SourceLocation& where() const noexcept { return where_; }

 private:
  SourceLocation where_;
};

/// Bad configuration: YAML file, --set override or command-line flag.
class ConfigError : public Error {
  using Error::Error;
};
/// Bad or unreadable corpus, vocabulary or token cache.
class DataError : public Error {
  using Error::Error;
};
/// Rendezvous, process group or collective failure; messages name the rank.
class DistError : public Error {
  using Error::Error;
};
/// Missing, corrupt or mismatching checkpoint.
class CheckpointError : public Error {
  using Error::Error;
};
/// A CUDA, NCCL or other device call failed, or a device was asked for where none exists.
class DeviceError : public Error {
  using Error::Error;
};

}  // namespace nmt

/// Throws ErrorType with a fmt-formatted message when cond is false, recording file and line.
///   NMT_CHECK(n > 0, nmt::DataError, "{}: expected at least one line, found none", path);
#define NMT_CHECK(cond, ErrorType, ...)                                                 \
  do {                                                                                  \
    if (!(cond)) throw ErrorType(::fmt::format(__VA_ARGS__), {__FILE__, __LINE__});     \
  } while (false)

/// Throws ErrorType with a fmt-formatted message, recording file and line.
#define NMT_THROW(ErrorType, ...) throw ErrorType(::fmt::format(__VA_ARGS__), {__FILE__, __LINE__})
