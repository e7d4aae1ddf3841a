#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>

#include "skip.h"

namespace {

int g_failures = 0;  // in the running test case

/// Counts the failed assertions of each test case, for NMT_SKIP (skip.h).
class FailureCounter : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;

  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    TestEventListenerBase::testCaseStarting(info);
    g_failures = 0;
  }

  bool assertionEnded(const Catch::AssertionStats& stats) override {
    if (!stats.assertionResult.isOk()) ++g_failures;
    return true;
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(FailureCounter)

namespace nmt::test {

int failures_in_current_case() { return g_failures; }

bool cuda_required() {
  const char* value = std::getenv("NMT_REQUIRE_CUDA");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

}  // namespace nmt::test
