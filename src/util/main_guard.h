#pragma once
// The one top-level catch of every app: run_main("nmt-train", [&] { ...; return 0; }).

#include <functional>
#include <string_view>

namespace nmt {

/// Runs body and returns its exit code. An nmt::Error becomes one line on stderr,
/// "<program>: error: <message>" (with the rank when there are several), and exit code 1;
/// any other exception is reported as an internal error, also with exit code 1. At debug log
/// level the source location of the failed check is printed too.
int run_main(std::string_view program, const std::function<int()>& body);

}  // namespace nmt
