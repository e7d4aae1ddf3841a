// train/tensorboard_log: metrics records become tagged scalars; a resumed run drops the events
// that earlier runs wrote after its starting step, so no step appears twice.
#include "catch_torch.h"  // first: see the header

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "amp/loss_scaler.h"
#include "test_support.h"
#include "train/progress.h"
#include "train/tensorboard_log.h"
#include "util/event_file.h"

using nmt::train::TensorBoardLog;
namespace ef = nmt::event_file;

namespace {

nmt::json::Object train_record(int64_t step) {
  nmt::json::Object r;
  r.add("type", "train").add("step", step).add("loss", 10.0 / double(step)).add("lr", 1e-4);
  return r;
}

/// The events files of a folder, in name order (TensorBoard's reading order).
std::vector<std::filesystem::path> events_files(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(folder)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
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
  nmt::json::Object nested;
  nested.add("en-de", 3.5).add("note", "text");
  nmt::json::Object valid;
  valid.add("type", "valid")
      .add("set", "dev")
      .add("step", int64_t{8})
      .add("bleu", 2.25)
      .add("best", true)
      .add_raw("chrf", "null")
      .add("pairs", nested)
      .add("counts", std::vector<double>{1, 2});
  int64_t step = 0;
  const auto scalars = TensorBoardLog::scalars(valid, &step);
  CHECK(step == 8);
  std::map<std::string, float> tags;
  for (const auto& s : scalars) tags[s.tag] = s.value;
  CHECK(tags == std::map<std::string, float>{{"valid/dev/bleu", 2.25f},
                                             {"valid/dev/pairs/en-de", 3.5f},
                                             {"valid/dev/counts/0", 1.0f},
                                             {"valid/dev/counts/1", 2.0f}});
  nmt::json::Object no_step;
  no_step.add("type", "train").add("loss", 1.0);
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
  // A run restarted from nothing drops them all; a leftover of an interrupted rewrite goes.
  std::ofstream(folder / (first_file.filename().string() + ".tmp-123")) << "partial";
  TensorBoardLog restarted(folder, 0);
  CHECK(events_files(folder) == std::vector<std::filesystem::path>{restarted.file()});
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
