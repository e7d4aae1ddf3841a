// The stop signals' handling, and agreed_stop: the ranks agree through the job's store on the update after which all stop.
#include "catch_torch.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <optional>
#include <thread>

#include "memory_store.h"
#include "train/stop_signal.h"

using nmt::train::agreed_stop;

TEST_CASE("agreed_stop: the first rank that asks fixes the update after which all stop",
          "[train]") {
  nmt::test::MemoryStore store;  // shared by two ranks
  CHECK_FALSE(agreed_stop(store, 4, false).has_value());  // nobody asked yet
  CHECK_FALSE(agreed_stop(store, 4, false).has_value());
  CHECK(agreed_stop(store, 5, true) == 6);   // rank 1 asks after 5 updates: stop after 6
  CHECK(agreed_stop(store, 5, false) == 6);  // rank 0 hears it
  CHECK(agreed_stop(store, 6, true) == 6);   // a later ask keeps the first one's update
}

TEST_CASE("agreed_stop without any signal never stops", "[train]") {
  nmt::test::MemoryStore store;
  for (int64_t done = 0; done < 50; ++done) CHECK_FALSE(agreed_stop(store, done, false));
}

TEST_CASE("agreed_stop: a value of the stop key that is no number is named malformed", "[train]") {
  nmt::test::MemoryStore store;
  store.set("nmt/stop_after", "soon");
  CHECK_THROWS_WITH(agreed_stop(store, 3, false),
                    Catch::Matchers::Contains("malformed value of 'nmt/stop_after'") &&
                        Catch::Matchers::Contains("'soon'"));
  store.set("nmt/stop_after", std::string(100, '9'));
  CHECK_THROWS_WITH(agreed_stop(store, 3, false), Catch::Matchers::Contains("malformed"));
}

namespace {

/// Runs `body` in a child process and returns its wait status: signal handlers and a pending
/// stop stay out of this test process.
template <class Body>
int in_child(Body body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

}  // namespace

TEST_CASE("stop signals: two at once ask for one stop, as timeout and a terminal send them",
          "[train]") {
  // GNU timeout signals the child and then its whole process group; Ctrl-C reaches every
  // process of the foreground group and the launcher forwards it too. Either way a worker gets
  // the same signal twice within microseconds: that must not be the "second signal" that ends
  // it at once, or it dies without its checkpoint (seen as a flaky SIGTERM test under load).
  const int status = in_child([] {
    nmt::train::install_stop_handlers();
    std::raise(SIGTERM);
    std::raise(SIGTERM);
    std::raise(SIGINT);
    return nmt::train::stop_requested() ? 0 : 1;
  });
  INFO("wait status " << status);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("stop signals: a signal after the repeat window ends the process at once", "[train]") {
  const int status = in_child([] {
    nmt::train::install_stop_handlers();
    std::raise(SIGTERM);
    std::this_thread::sleep_for(std::chrono::duration<double>(
        nmt::train::kRepeatedStopSignalSeconds + 0.2));
    std::raise(SIGTERM);
    return 3;  // not reached: the second SIGTERM ends the process
  });
  INFO("wait status " << status);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
}
