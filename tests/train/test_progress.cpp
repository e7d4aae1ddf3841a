// train/progress: the metrics record of a log interval says how its time split was measured.
#include "catch_torch.h"  // first: see the header

#include <fstream>
#include <sstream>
#include <string>

#include "amp/loss_scaler.h"
#include "test_support.h"
#include "train/progress.h"

using Catch::Matchers::Contains;
using nmt::train::IntervalTotals;
using nmt::train::Progress;

namespace {

/// The metrics.jsonl text after one interval with the given totals.
std::string record_of(const IntervalTotals& totals) {
  nmt::test::TempDir dir;
  nmt::train::TrainOptions options;
  options.max_steps = 10;
  {
    Progress progress(options, 0, dir.path() / "metrics.jsonl", 0, 0.0);
    progress.interval(2, 1, totals, nmt::amp::ScalerStats{}, 0.5, 100.0);
  }
  std::ifstream in(dir.path() / "metrics.jsonl");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

IntervalTotals some_interval() {
  IntervalTotals t;
  t.loss_sum = 20;
  t.nll_sum = 18;
  t.tgt_tokens = 10;
  t.src_tokens = 12;
  t.padded_tokens = 30;
  t.seconds = 2;
  t.data_wait_s = 0.1, t.forward_s = 0.7, t.backward_s = 1.0, t.sync_s = 0.05, t.optimizer_s = 0.1;
  return t;
}

}  // namespace

TEST_CASE("a CPU interval records its phase split as wall time", "[train][progress]") {
  const std::string record = record_of(some_interval());
  CHECK_THAT(record, Contains("\"forward_s\": 0.7"));
  CHECK_THAT(record, Contains("\"backward_s\": 1"));
  CHECK_THAT(record, Contains("\"time_split\": \"wall\""));
}

TEST_CASE("a GPU interval leaves the host's queueing times out and says why", "[train][progress]") {
  IntervalTotals t = some_interval();
  t.split_measured = false;
  const std::string record = record_of(t);
  CHECK_THAT(record, Contains("\"forward_s\": null"));
  CHECK_THAT(record, Contains("\"optimizer_s\": null"));
  CHECK_THAT(record, Contains("\"time_split\": \"omitted: the device runs asynchronously"));
  CHECK_THAT(record, Contains("\"data_wait_s\": 0.1"));  // waiting for data is host time anyway
  CHECK_THAT(record, Contains("\"tokens_per_s\": 11"));  // 22 real tokens in 2 s
}
