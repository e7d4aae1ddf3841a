#pragma once
// A test case that cannot run here (no GPU, no Python with a package, no launcher binary) is
// reported as skipped, never as passed: NMT_SKIP prints "SKIPPED: <reason>" and ends the case,
// and CTest turns that line into "Not Run (Skipped)" with the reason in the log
// (SKIP_REGULAR_EXPRESSION, set for every discovered case in tests/CMakeLists.txt). Catch2 v2,
// which Debian ships, has no SKIP of its own. Include after Catch.
//
//   if (!at::hasCUDA()) NMT_SKIP_WITHOUT_CUDA("no CUDA device visible");     // a [cuda] case
//   if (!python_has("safetensors")) NMT_SKIP("no safetensors package");
//
// CTest's skip pattern wins over the exit status, so a case that had already failed an
// assertion would be reported as skipped: NMT_SKIP fails such a case instead (the listener in
// catch_main.cpp counts its failures). On a GPU box (NMT_REQUIRE_CUDA=1, set by
// scripts/gpu/check.sh) a [cuda] case that finds no GPU fails rather than skips.

namespace nmt::test {

/// Failed assertions in the running test case so far, over all its sections.
int failures_in_current_case();

/// Whether NMT_REQUIRE_CUDA=1: a [cuda] case must find a GPU.
bool cuda_required();

}  // namespace nmt::test

/// Ends the current test case as skipped, giving the reason (streamable, like WARN); a case
/// that already failed an assertion fails here instead.
#define NMT_SKIP(...)                                                                     \
  do {                                                                                    \
    if (nmt::test::failures_in_current_case() > 0) {                                      \
      FAIL("not skipped: the case failed before its skip (" << __VA_ARGS__ << ")");       \
    }                                                                                     \
    WARN("SKIPPED: " << __VA_ARGS__);                                                     \
    return;                                                                               \
  } while (false)

/// NMT_SKIP for a [cuda] case without a GPU, except under NMT_REQUIRE_CUDA=1, where it fails.
#define NMT_SKIP_WITHOUT_CUDA(...)                                                        \
  do {                                                                                    \
    if (nmt::test::cuda_required()) {                                                     \
      FAIL("NMT_REQUIRE_CUDA=1, but this [cuda] case found no GPU: " << __VA_ARGS__);     \
    }                                                                                     \
    NMT_SKIP(__VA_ARGS__);                                                                \
  } while (false)
