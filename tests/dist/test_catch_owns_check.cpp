#include "catch_torch.h"  // first: see the header

#include <ATen/ATen.h>

// Regression: c10's CHECK silently replaced Catch's in tests that include LibTorch after
// Catch. A failing Catch CHECK is reported (this test is expected to fail); c10's would
// abort the whole binary instead.
TEST_CASE("CHECK in LibTorch tests is Catch's", "[dist][!shouldfail]") {
  CHECK(at::ones({1}).item<int>() == 2);
}
