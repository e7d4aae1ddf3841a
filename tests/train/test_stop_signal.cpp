// agreed_stop: the ranks agree through the job's store on the update after which all stop.
#include "catch_torch.h"

#include <optional>

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
