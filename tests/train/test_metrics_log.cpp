// train/metrics_log: records are appended one per line; a run that starts from a step first
// drops what earlier runs wrote after it (and a line a crash cut short), so no step appears
// twice; a failed write is an error, not a silent loss.
#include "catch_torch.h"  // first: see the header

#include <filesystem>
#include <fstream>
#include <string>

#include "skip.h"
#include "test_support.h"
#include "train/metrics_log.h"
#include "util/error.h"

using nmt::test::read_file;
using nmt::test::TempDir;
using nmt::train::MetricsLog;

namespace {

nmt::json::Object record(const char* type, int64_t step) {
  nmt::json::Object r;
  r.add("type", type).add("step", step).add("loss", 1.5 / double(step));
  return r;
}

void write_text(const std::filesystem::path& file, const std::string& text) {
  std::ofstream(file, std::ios::binary) << text;
}

}  // namespace

TEST_CASE("metrics.jsonl: a resumed run drops the records after its starting step, then appends",
          "[train][metrics]") {
  TempDir dir;
  const auto file = dir.path() / "run" / "metrics.jsonl";
  {
    MetricsLog log(file, true);
    for (int64_t step : {2, 4, 6, 8}) log.write(record("train", step));
    log.write(record("valid", 6));
  }
  // The crashed run's last checkpoint was step 4: steps 6 and 8 come again.
  {
    MetricsLog log(file, true, false, 4);
    CHECK(read_file(file) == record("train", 2).str() + "\n" + record("train", 4).str() + "\n");
    log.write(record("train", 6));
  }
  CHECK(read_file(file) == record("train", 2).str() + "\n" + record("train", 4).str() + "\n" +
                               record("train", 6).str() + "\n");
  // Starting from the last step logged keeps everything, and leaves the file untouched.
  CHECK_FALSE(MetricsLog::drop_after(file, 6));
}

TEST_CASE("metrics.jsonl: a line a crash cut short is dropped, so the next record is whole",
          "[train][metrics]") {
  TempDir dir;
  const auto file = dir.path() / "metrics.jsonl";
  const std::string whole = record("train", 2).str() + "\n";
  write_text(file, whole + R"({"type": "train", "step": 4, "lo)");
  {
    MetricsLog log(file, true, false, 4);
    log.write(record("train", 4));
  }
  CHECK(read_file(file) == whole + record("train", 4).str() + "\n");
}

TEST_CASE("metrics.jsonl: only a top-level integer step decides, other lines stay",
          "[train][metrics]") {
  TempDir dir;
  const auto file = dir.path() / "metrics.jsonl";
  const std::string kept =
      R"({"type": "note", "text": "\"step\": 99"})" "\n"
      R"({"type": "train", "inner": {"step": 99}, "step": 3})" "\n"
      R"({"type": "odd", "step": 2.5e3})" "\n";
  write_text(file, kept + R"({"type": "step", "inner": {"step": 1}, "step": 12})" "\n");
  CHECK(MetricsLog::drop_after(file, 3));
  CHECK(read_file(file) == kept);
}

TEST_CASE("metrics.jsonl: a write that fails is an error naming the file", "[train][metrics]") {
  if (!std::filesystem::exists("/dev/full")) NMT_SKIP("no /dev/full on this system");
  MetricsLog log("/dev/full", true);
  try {
    log.write(record("train", 1));
    FAIL("the write to /dev/full did not fail");
  } catch (const nmt::Error& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains("/dev/full: write failed"));
  }
}
