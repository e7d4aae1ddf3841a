#pragma once
// A test case that cannot run here (no GPU, no Python with a package, no launcher binary) is
// reported as skipped, never as passed: NMT_SKIP prints "SKIPPED: <reason>" and ends the case,
// and CTest turns that line into "Not Run (Skipped)" with the reason in the log
// (SKIP_REGULAR_EXPRESSION, set for every discovered case in tests/CMakeLists.txt). Catch2 v2,
// which Debian ships, has no SKIP of its own. Include after Catch.
//
//   if (!at::hasCUDA()) NMT_SKIP("no CUDA device visible");

/// Ends the current test case as skipped, giving the reason (streamable, like WARN).
#define NMT_SKIP(...)                     \
  do {                                    \
    WARN("SKIPPED: " << __VA_ARGS__);     \
    return;                               \
  } while (false)
