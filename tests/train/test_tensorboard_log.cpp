// train/tensorboard_log: metrics records become tagged scalars; a resumed run drops the events
// that earlier runs wrote after its starting step, so no step appears twice, whether or not it
// writes events itself; it touches only the files nmt-train wrote, and removes only the temp
// files of its own rewrites whose writer is gone.
#include "catch_torch.h"  // first: see the header

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include "amp/loss_scaler.h"
#include "monitor_fixture.h"
#include "skip.h"
#include "test_support.h"
#include "train/metrics_log.h"
#include "train/progress.h"
#include "train/tensorboard_log.h"
#include "util/event_file.h"

using nmt::train::TensorBoardLog;
namespace ef = nmt::event_file;

namespace {

nlohmann::ordered_json train_record(int64_t step) {
  return {{"type", "train"}, {"step", step}, {"loss", 10.0 / double(step)}, {"lr", 1e-4}};
}

/// The events files of a folder, in name order (TensorBoard's reading order).
std::vector<std::filesystem::path> events_files(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(folder)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

/// The bytes of an events file: a file_version event, then one event of scalars per step.
std::string events_bytes(const std::vector<int64_t>& scalar_steps) {
  std::string out = ef::frame_record(ef::encode_event({1.5, 0, "brain.Event:2", {}}));
  for (int64_t step : scalar_steps)
    out += ef::frame_record(ef::encode_event({2.5, step, "", {{"other/tag", 1.0f}}}));
  return out;
}

/// Steps of the scalar events of the files, in reading order.
std::vector<int64_t> steps(const std::vector<std::filesystem::path>& files) {
  std::vector<int64_t> out;
  for (const auto& file : files)
    for (const std::string& payload : ef::read_records(file).payloads) {
      const ef::Event e = ef::decode_event(payload);
      if (!e.scalars.empty()) out.push_back(e.step);
    }
  return out;
}

}  // namespace

TEST_CASE("tensorboard_log: every number of a record is a scalar tagged by type, set and path",
          "[tensorboard]") {
  nlohmann::ordered_json valid;
  valid["type"] = "valid";
  valid["set"] = "dev";
  valid["step"] = int64_t{8};
  valid["bleu"] = 2.25;
  valid["best"] = true;
  valid["chrf"] = nullptr;
  valid["nan"] = std::nan("");  // written as null: no scalar either
  valid["pairs"] = {{"en-de", 3.5}, {"note", "text"}};
  valid["counts"] = std::vector<double>{1, 2};
  int64_t step = 0;
  const auto scalars = TensorBoardLog::scalars(valid, &step);
  CHECK(step == 8);
  std::map<std::string, float> tags;
  for (const auto& s : scalars) tags[s.tag] = s.value;
  CHECK(tags == std::map<std::string, float>{{"valid/dev/bleu", 2.25f},
                                             {"valid/dev/pairs/en-de", 3.5f},
                                             {"valid/dev/counts/0", 1.0f},
                                             {"valid/dev/counts/1", 2.0f}});
  const nlohmann::ordered_json no_step{{"type", "train"}, {"loss", 1.0}};
  CHECK(TensorBoardLog::scalars(no_step, &step).empty());
}

TEST_CASE("tensorboard_log: a resumed run drops later events of earlier runs, not earlier ones",
          "[tensorboard]") {
  nmt::test::TempDir dir;
  const auto folder = dir.path() / "tensorboard";
  std::filesystem::path first_file;
  {
    TensorBoardLog first(folder, 0);
    first_file = first.file();
    for (int64_t step = 2; step <= 10; step += 2) first.write(train_record(step));
  }
  // Cut mid-record, as a crash would leave it.
  std::filesystem::resize_file(first_file, std::filesystem::file_size(first_file) - 3);
  CHECK(steps({first_file}) == std::vector<int64_t>{2, 4, 6, 8});
  {
    TensorBoardLog resumed(folder, 6);  // its checkpoint was step 6
    CHECK(resumed.file() > first_file);
    for (int64_t step = 8; step <= 12; step += 2) resumed.write(train_record(step));
  }
  const auto files = events_files(folder);
  REQUIRE(files.size() == 2);
  CHECK(files[0] == first_file);
  CHECK_FALSE(ef::read_records(first_file).damaged_tail);
  CHECK(steps(files) == std::vector<int64_t>{2, 4, 6, 8, 10, 12});
  // A run restarted from nothing drops them all.
  TensorBoardLog restarted(folder, 0);
  CHECK(events_files(folder) == std::vector<std::filesystem::path>{restarted.file()});
}

TEST_CASE("tensorboard_log: a resume leaves the files of other tools alone", "[tensorboard]") {
  nmt::test::TempDir dir;
  const auto folder = dir.path() / "tensorboard";
  std::filesystem::create_directories(folder);
  // Names as PyTorch's SummaryWriter and TensorFlow give them: no scalars, and later steps.
  const std::string empty = events_bytes({}), later = events_bytes({2, 20});
  const auto no_scalars = folder / "events.out.tfevents.1700000000.otherhost.77.0";
  const auto with_later = folder / "events.out.tfevents.1700000001.otherhost.78.1.v2";
  const auto being_written = folder / ("events.out.tfevents.1700000002.otherhost.79.tmp-" +
                                       std::to_string(nmt::test::dead_pid()));
  std::ofstream(no_scalars, std::ios::binary) << empty;
  std::ofstream(with_later, std::ios::binary) << later;
  std::ofstream(being_written, std::ios::binary) << later;
  std::filesystem::path ours;
  {
    TensorBoardLog first(folder, 0);
    ours = first.file();
    for (int64_t step = 2; step <= 8; step += 2) first.write(train_record(step));
  }
  { TensorBoardLog resumed(folder, 4); }
  CHECK(nmt::test::read_file(no_scalars) == empty);
  CHECK(nmt::test::read_file(with_later) == later);
  CHECK(nmt::test::read_file(being_written) == later);
  CHECK(steps({ours}) == std::vector<int64_t>{2, 4});
  // And from step 0: everything of ours goes, nothing of theirs.
  { TensorBoardLog restarted(folder, 0); }
  CHECK_FALSE(std::filesystem::exists(ours));
  CHECK(nmt::test::read_file(no_scalars) == empty);
  CHECK(nmt::test::read_file(with_later) == later);
}

TEST_CASE("tensorboard_log: a dead rewrite's temp file goes, a live process's stays",
          "[tensorboard]") {
  nmt::test::TempDir dir;
  const auto folder = dir.path() / "tensorboard";
  std::filesystem::create_directories(folder);
  const auto gone = folder / ("nmt-train-rewrite.tmp-" + std::to_string(nmt::test::dead_pid()));
  const auto running = folder / ("nmt-train-rewrite.tmp-" + std::to_string(::getppid()));
  std::ofstream(gone) << "partial";
  std::ofstream(running) << "partial";
  { TensorBoardLog log(folder, 0); }
  CHECK_FALSE(std::filesystem::exists(gone));
  CHECK(std::filesystem::exists(running));
}

TEST_CASE("tensorboard_log: a resume without log.tensorboard still drops the later events",
          "[tensorboard]") {
  nmt::test::TempDir dir;
  const auto folder = dir.path() / "tensorboard";
  std::filesystem::path ours;
  {
    TensorBoardLog first(folder, 0);
    ours = first.file();
    for (int64_t step = 2; step <= 8; step += 2) first.write(train_record(step));
  }
  { nmt::train::MetricsLog metrics(dir.path() / "metrics.jsonl", true, false, 4); }
  CHECK(steps(events_files(folder)) == std::vector<int64_t>{2, 4});
  { nmt::train::MetricsLog metrics(dir.path() / "metrics.jsonl", true, false, 0); }
  CHECK(events_files(folder).empty());
}

TEST_CASE("tensorboard_log: a start at step 0 warns how many events it drops", "[tensorboard]") {
  nmt::test::TempDir dir;
  const auto folder = dir.path() / "tensorboard";
  {
    TensorBoardLog first(folder, 0);
    for (int64_t step = 2; step <= 8; step += 2) first.write(train_record(step));
  }
  nmt::test::LogCapture capture;
  { TensorBoardLog restarted(folder, 0); }
  CHECK(nmt::test::count_lines_with(
            capture.text(), "warning [train] " + folder.string() +
                                ": this run starts at step 0, so the 4 event(s) that earlier "
                                "runs wrote are dropped") == 1);
}

TEST_CASE("tensorboard_log: Progress writes metrics.jsonl's records when log.tensorboard is on",
          "[tensorboard]") {
  nmt::test::TempDir dir;
  nmt::train::TrainOptions options;
  options.max_steps = 10;
  options.tensorboard = true;
  {
    nmt::train::Progress progress(options, 0, dir.path() / "metrics.jsonl", 0, 0.0);
    nmt::train::IntervalTotals t;
    t.loss_sum = 20;
    t.tgt_tokens = 10;
    t.seconds = 2;
    progress.interval(2, 1, t, nmt::amp::ScalerStats{}, 0.5, 100.0);
  }
  const auto files = events_files(dir.path() / "tensorboard");
  REQUIRE(files.size() == 1);
  const auto records = ef::read_records(files[0]).payloads;
  REQUIRE(records.size() == 2);
  CHECK(ef::decode_event(records[0]).file_version == "brain.Event:2");
  const ef::Event e = ef::decode_event(records[1]);
  CHECK(e.step == 2);
  std::map<std::string, float> tags;
  for (const auto& s : e.scalars) tags[s.tag] = s.value;
  CHECK(tags.at("train/loss") == 2.0f);
  CHECK(tags.at("train/grad_norm") == 0.5f);
  CHECK(tags.at("train/peak_memory_mb") == 100.0f);
  CHECK(tags.count("train/time_split") == 0);
  // Off (the default): no folder.
  nmt::test::TempDir off;
  options.tensorboard = false;
  { nmt::train::Progress progress(options, 0, off.path() / "metrics.jsonl", 0, 0.0); }
  CHECK_FALSE(std::filesystem::exists(off.path() / "tensorboard"));
}

TEST_CASE(
    "tensorboard_log: our files carry the nmt-train ending, rewrites a name without "
    "tfevents",
    "[tensorboard]") {
  nmt::test::TempDir dir;
  TensorBoardLog log(dir.path(), 0);
  CHECK(TensorBoardLog::is_ours(log.file()));
  CHECK_THAT(log.file().filename().string(), Catch::Matchers::StartsWith("events.out.tfevents."));
  CHECK_FALSE(TensorBoardLog::is_ours("events.out.tfevents.1700000000.host.12"));
  CHECK_FALSE(TensorBoardLog::is_ours("events.out.tfevents.1700000000.host.12.nmt-train.tmp-3"));
  // TensorBoard's loader reads every file whose name holds "tfevents" (io_wrapper.py).
  const auto temp = TensorBoardLog::temp_path(dir.path()).filename().string();
  CHECK(temp.find("tfevents") == std::string::npos);
  CHECK(temp == "nmt-train-rewrite.tmp-" + std::to_string(::getpid()));
}

TEST_CASE("tensorboard_log: a failed write warns once naming the file, and the run goes on",
          "[tensorboard]") {
  if (!std::filesystem::exists("/dev/full")) NMT_SKIP("no /dev/full on this system");
  nmt::test::LogCapture capture;
  {
    auto log = TensorBoardLog::append_to("/dev/full");  // its first event fails already
    CHECK_NOTHROW(log.write(train_record(2)));
    CHECK_NOTHROW(log.write(train_record(4)));
  }
  const std::string text = capture.text();
  CHECK(nmt::test::count_lines_with(text, "warning [train] /dev/full: write failed") == 1);
  CHECK(nmt::test::count_lines_with(text, "/dev/full: 3 record(s) of this run were not written") ==
        1);
}
