#pragma once
// Checks shared by the end-to-end tests of every binary (nmt-train, nmt-translate, nmt-score,
// nmt-ckpt). The runs of nmt-train itself have their helpers in train_support.h.

#include <algorithm>
#include <string>

#include <catch2/catch.hpp>

#include "test_support.h"

namespace nmt::test {

/// A user's mistake is reported as exactly one line on stderr, "<program>: error: ...", that
/// contains `message`, with exit code 1 and no stack dump.
inline void check_one_error_line(const std::string& program, const CommandResult& r,
                                 const std::string& message) {
  INFO(program << " stderr: " << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Matchers::StartsWith(program + ": error: ") &&
                        Catch::Matchers::Contains(message) && Catch::Matchers::EndsWith("\n"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

}  // namespace nmt::test
