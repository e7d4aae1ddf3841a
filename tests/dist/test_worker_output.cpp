// dist/worker_output: the end of a worker's log file, for the report of a failed worker.
#include <catch2/catch.hpp>

#include <string>

#include "dist/worker_output.h"
#include "test_support.h"

TEST_CASE("last_line_of gives a file's last non-empty line, read from its end",
          "[dist][launch]") {
  nmt::test::TempDir dir;
  CHECK(nmt::dist::last_line_of(dir.path() / "missing.log").empty());
  CHECK(nmt::dist::last_line_of(dir.write("empty.log", "")).empty());
  CHECK(nmt::dist::last_line_of(dir.write("one.log", "only")) == "only");
  CHECK(nmt::dist::last_line_of(dir.write("crlf.log", "a\r\nlast words\r\n\n")) == "last words");
  // Only the last 8 KiB are read: a long log costs nothing.
  const std::string big(1 << 20, 'x');
  CHECK(nmt::dist::last_line_of(dir.write("big.log", big + "\nthe end\n")) == "the end");
}
