// train/metrics_log: records are appended one per line; a run that starts from a step first
// drops what earlier runs wrote after it (and a line a crash cut short), so no step appears
// twice, with a warning when that is every record (a start at step 0); a rewrite keeps the
// file's permissions and clears dead writers' temp files; a failed write warns once and the
// run goes on (train/monitor_file.h).
#include "catch_torch.h"  // first: see the header

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "monitor_fixture.h"
#include "skip.h"
#include "test_support.h"
#include "train/metrics_log.h"
#include "util/error.h"
#include "util/event_file.h"
#include "util/json_text.h"

using nmt::test::LogCapture;
using nmt::test::read_file;
using nmt::test::TempDir;
using nmt::train::MetricsLog;

namespace {

nlohmann::ordered_json record(const char* type, int64_t step) {
  return {{"type", type}, {"step", step}, {"loss", 1.5 / double(step)}};
}

/// A record's line, as MetricsLog writes it.
std::string line(const nlohmann::ordered_json& record) { return nmt::json::line(record) + "\n"; }

/// A record with every kind of member the trainer writes (strings that need escapes, integers,
/// reals, non-finite reals, booleans, null, a nested object and arrays).
nlohmann::ordered_json pinned_record() {
  nlohmann::ordered_json r;
  r["type"] = "valid";
  r["step"] = int64_t{12};
  r["loss"] = 2.5;
  r["whole"] = 2.0;
  r["tiny"] = 1e-5;
  r["sum"] = 0.1 + 0.2;
  r["big"] = 1e21;
  r["neg"] = -0.125;
  r["nan"] = std::nan("");
  r["inf"] = HUGE_VAL;
  r["best"] = true;
  r["none"] = nmt::json::or_null(std::optional<double>());
  r["text"] = "a \"q\" \\ /\t\n\x01 \xC3\xBC";
  r["pairs"] = {{"en-de", 3.5}, {"n", int64_t{-7}}};
  r["peaks"] = std::vector<double>{1.5, 2};
  r["names"] = std::vector<std::string>{"a", "b"};
  return r;
}

void write_text(const std::filesystem::path& file, const std::string& text) {
  std::ofstream(file, std::ios::binary) << text;
}

}  // namespace

TEST_CASE("metrics.jsonl: a record is one line of exactly these bytes", "[train][metrics]") {
  // Scripts and resumed runs read these lines: separators, member order, number text (the
  // shortest that reads back, 2.0 as 2), null for non-finite numbers and the escapes are pinned.
  TempDir dir;
  const auto file = dir.path() / "metrics.jsonl";
  {
    MetricsLog log(file, true);
    log.write(pinned_record());
  }
  CHECK(
      read_file(file) ==
      "{\"type\": \"valid\", \"step\": 12, \"loss\": 2.5, \"whole\": 2, \"tiny\": 1e-05, "
      "\"sum\": 0.30000000000000004, \"big\": 1e+21, \"neg\": -0.125, \"nan\": null, "
      "\"inf\": null, \"best\": true, \"none\": null, "
      "\"text\": \"a \\\"q\\\" \\\\ /\\t\\n\\u0001 \xC3\xBC\", "
      "\"pairs\": {\"en-de\": 3.5, \"n\": -7}, \"peaks\": [1.5, 2], \"names\": [\"a\", \"b\"]}\n");
}

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
    CHECK(read_file(file) == line(record("train", 2)) + line(record("train", 4)));
    log.write(record("train", 6));
  }
  CHECK(read_file(file) ==
        line(record("train", 2)) + line(record("train", 4)) + line(record("train", 6)));
  // Starting from the last step logged keeps everything, and leaves the file untouched.
  CHECK_FALSE(MetricsLog::drop_after(file, 6));
}

TEST_CASE("metrics.jsonl: a line a crash cut short is dropped, so the next record is whole",
          "[train][metrics]") {
  TempDir dir;
  const auto file = dir.path() / "metrics.jsonl";
  const std::string whole = line(record("train", 2));
  write_text(file, whole + R"({"type": "train", "step": 4, "lo)");
  {
    MetricsLog log(file, true, false, 4);
    log.write(record("train", 4));
  }
  CHECK(read_file(file) == whole + line(record("train", 4)));
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

TEST_CASE("metrics.jsonl: a failed write warns once naming the file, and the run goes on",
          "[train][metrics]") {
  if (!std::filesystem::exists("/dev/full")) NMT_SKIP("no /dev/full on this system");
  LogCapture capture;
  {
    MetricsLog log("/dev/full", true);
    CHECK_NOTHROW(log.write(record("train", 1)));
    CHECK_NOTHROW(log.write(record("train", 2)));
    CHECK_NOTHROW(log.write(record("valid", 2)));
  }
  const std::string text = capture.text();
  CHECK(nmt::test::count_lines_with(text, "warning [train] /dev/full: write failed") == 1);
  CHECK(nmt::test::count_lines_with(text, "/dev/full: 3 record(s) of this run were not written") ==
        1);
}

TEST_CASE(
    "metrics.jsonl: a start at step 0 drops every earlier record with a warning saying "
    "how many",
    "[train][metrics]") {
  TempDir dir;
  const auto file = dir.path() / "metrics.jsonl";
  {
    MetricsLog log(file, true);
    for (int64_t step : {2, 4, 6}) log.write(record("train", step));
  }
  LogCapture capture;
  { MetricsLog log(file, true, false, 0); }
  CHECK(read_file(file).empty());
  const std::string text = capture.text();
  CHECK(nmt::test::count_lines_with(text, "warning [train] " + file.string() +
                                              ": this run starts at step 0, so the 3 "
                                              "record(s) that earlier runs wrote are dropped") ==
        1);
}

TEST_CASE("metrics.jsonl: a rewrite keeps the file's permissions", "[train][metrics]") {
  TempDir dir;
  const auto file = dir.path() / "metrics.jsonl";
  write_text(file, line(record("train", 2)) + line(record("train", 4)));
  std::filesystem::permissions(
      file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                std::filesystem::perms::group_read | std::filesystem::perms::others_read |
                std::filesystem::perms::others_write);
  const auto before = std::filesystem::status(file).permissions();
  REQUIRE(MetricsLog::drop_after(file, 2));
  CHECK(read_file(file) == line(record("train", 2)));
  CHECK(std::filesystem::status(file).permissions() == before);
}

TEST_CASE("metrics.jsonl: temp files of dead writers go, a live writer's and others' stay",
          "[train][metrics]") {
  TempDir dir;
  const auto dead = std::to_string(nmt::test::dead_pid());
  const auto live = std::to_string(::getppid());  // whoever started this test: running
  const auto gone = dir.write("metrics.jsonl.tmp-" + dead, "partial");
  const auto mine = dir.write("metrics.jsonl.tmp-" + std::to_string(::getpid()), "partial");
  const auto running = dir.write("metrics.jsonl.tmp-" + live, "partial");
  const auto other = dir.write("notes.txt.tmp-" + dead, "not ours");
  { MetricsLog log(dir.path() / "metrics.jsonl", true, false, 4); }
  CHECK_FALSE(std::filesystem::exists(gone));
  CHECK_FALSE(std::filesystem::exists(mine));  // this process is not writing it
  CHECK(std::filesystem::exists(running));
  CHECK(std::filesystem::exists(other));
}

TEST_CASE("metrics.jsonl: a replaced run's later records move with its checkpoints",
          "[train][metrics]") {
  // A run from an earlier step set the later checkpoints aside but rewrote their records away
  // (metrics.jsonl and the TensorBoard events, even with TensorBoard off): the checkpoints
  // kept had no curves.
  TempDir run;
  {
    MetricsLog first(run.path() / "metrics.jsonl", true, /*tensorboard=*/true);
    for (int64_t step = 2; step <= 8; step += 2) first.write(record("train", step));
  }
  const auto folder = run.path() / "checkpoints" / "superseded-x";
  nmt::train::set_aside_records_after(run.path(), 4, folder);
  CHECK(read_file(run.path() / "metrics.jsonl") ==
        line(record("train", 2)) + line(record("train", 4)));
  CHECK(read_file(folder / "metrics.jsonl") == line(record("train", 6)) + line(record("train", 8)));
  // The events: the same file name under folder/tensorboard/, its later steps only.
  std::vector<int64_t> kept, moved;
  const auto scalar_steps = [](const std::filesystem::path& dir, std::vector<int64_t>& out) {
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      for (const std::string& payload : nmt::event_file::read_records(entry.path()).payloads) {
        const nmt::event_file::Event e = nmt::event_file::decode_event(payload);
        if (!e.scalars.empty()) out.push_back(e.step);
      }
  };
  scalar_steps(run.path() / "tensorboard", kept);
  scalar_steps(folder / "tensorboard", moved);
  CHECK(kept == std::vector<int64_t>{2, 4});
  CHECK(moved == std::vector<int64_t>{6, 8});
  // The run that starts at step 4 then has nothing left to drop.
  LogCapture logs;
  MetricsLog resumed(run.path() / "metrics.jsonl", true, false, 4);
  CHECK(logs.text().find("dropped") == std::string::npos);
}
