// util/run_dir_lock: one run per run directory. A second holder is refused naming the first's
// host and pid; the lock goes with the holder's process (a SIGKILL frees it, however stale the
// file's text); and a released lock can be taken again.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "test_support.h"
#include "util/error.h"
#include "util/run_dir_lock.h"

using Catch::Matchers::Contains;
using nmt::RunDirLock;
using nmt::test::TempDir;

TEST_CASE("run_dir_lock: a second holder is refused naming the first, until it releases",
          "[run_dir_lock]") {
  // There was no lock: a second nmt-train on a live run's directory set its checkpoints aside,
  // and the two retentions deleted each other's files.
  TempDir tmp;
  const auto run_dir = tmp.path() / "run";  // created by acquire
  const std::string pid = std::to_string(::getpid());
  {
    const RunDirLock first = RunDirLock::acquire(run_dir);
    CHECK(first.held());
    REQUIRE(RunDirLock::holder(run_dir));
    CHECK_THAT(*RunDirLock::holder(run_dir), Contains("pid " + pid));
    // Another open of the file is another holder, even in this process (flock's semantics).
    CHECK_THROWS_AS(RunDirLock::acquire(run_dir), nmt::ConfigError);
    CHECK_THROWS_WITH(RunDirLock::acquire(run_dir), Contains("in use by another nmt-train") &&
                                                        Contains("pid " + pid) &&
                                                        Contains(run_dir.string()));
  }
  CHECK_FALSE(RunDirLock::holder(run_dir));
  const RunDirLock again = RunDirLock::acquire(run_dir);
  CHECK(again.held());
}

TEST_CASE("run_dir_lock: the lock ends with its holder's process, even killed", "[run_dir_lock]") {
  TempDir tmp;
  const auto run_dir = tmp.path();
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(ready[0]);
    try {
      const RunDirLock lock = RunDirLock::acquire(run_dir);
      const char byte = 'x';
      if (::write(ready[1], &byte, 1) != 1) ::_exit(2);
      ::pause();  // until killed
    } catch (...) {
    }
    ::_exit(1);
  }
  ::close(ready[1]);
  char byte = 0;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);
  CHECK_THROWS_WITH(RunDirLock::acquire(run_dir), Contains("pid " + std::to_string(child)));
  ::kill(child, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  // The file still names the dead holder; the kernel's lock is gone with it.
  CHECK(std::filesystem::exists(run_dir / nmt::kRunDirLockName));
  CHECK_FALSE(RunDirLock::holder(run_dir));
  CHECK(RunDirLock::acquire(run_dir).held());
}
