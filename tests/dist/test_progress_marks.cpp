// ProgressMarks: where each rank is, and the report that names the ranks behind, over an
// in-memory store.
#include "catch_torch.h"

#include <memory>
#include <string>
#include <vector>

#include "dist/progress_marks.h"
#include "memory_store.h"

using nmt::dist::ProgressMarks;
using nmt::dist::RankMark;
using nmt::dist::describe_progress;

TEST_CASE("describe_progress names the ranks behind the newest mark", "[dist]") {
  CHECK(describe_progress({{4, "step 3: backward done"}, {3, "step 2: backward done"}}, 0) ==
        "; behind: rank 1 is at 'step 2: backward done'; the others are at 'step 3: backward "
        "done' (this is rank 0)");
  CHECK(describe_progress({{2, "step 2"}, {-1, ""}, {2, "step 2"}}, 2) ==
        "; behind: rank 1 has not started; the others are at 'step 2' (this is rank 2)");
  CHECK(describe_progress({{5, "step 5"}, {5, "step 5"}}, 1) ==
        "; every rank got to 'step 5', so the hang is inside this collective");
}

TEST_CASE("ProgressMarks report nothing before this rank marks, then every rank's place",
          "[dist]") {
  auto store = std::make_shared<nmt::test::MemoryStore>();
  ProgressMarks rank0(store, 0, 2, std::nullopt), rank1(store, 1, 2, std::nullopt);
  CHECK(rank0.report().empty());
  rank0.mark("step 1: backward done");
  CHECK(rank0.report() == "; behind: rank 1 has not started; the others are at 'step 1: "
                          "backward done' (this is rank 0)");
  rank1.mark("step 1: backward done");
  rank0.mark("step 2: backward done");
  CHECK(rank1.report() == "; behind: rank 1 is at 'step 1: backward done'; the others are at "
                          "'step 2: backward done' (this is rank 1)");
  rank1.mark("step 2: backward done");
  CHECK(rank0.report() ==
        "; every rank got to 'step 2: backward done', so the hang is inside this collective");
}

TEST_CASE("a malformed or oversized progress mark is reported as such, not as a silent store",
          "[dist]") {
  auto store = std::make_shared<nmt::test::MemoryStore>();
  ProgressMarks rank0(store, 0, 2, std::nullopt);
  rank0.mark("step 1: backward done");
  store->set("nmt/progress/1", "x|step 1");
  std::string report = rank0.report();
  INFO(report);
  CHECK_THAT(report, Catch::Matchers::Contains("malformed value of 'nmt/progress/1'"));
  CHECK_THAT(report, Catch::Matchers::Contains("'x'"));
  CHECK(report.find("does not answer") == std::string::npos);
  store->set("nmt/progress/1", "no bar at all");
  CHECK_THAT(rank0.report(), Catch::Matchers::Contains("malformed value of 'nmt/progress/1'"));
  store->set("nmt/progress/1", "1|" + std::string(5000, 'p'));
  report = rank0.report();
  CHECK_THAT(report, Catch::Matchers::Contains("holds 5002 bytes, more than the 1024"));
  CHECK(report.find("does not answer") == std::string::npos);
}
