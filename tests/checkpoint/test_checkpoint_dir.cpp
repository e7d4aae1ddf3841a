// A run's checkpoint folder: names, listing, retention, resuming and choosing the best.
#include "catch_torch.h"

#include "util/atomic_file.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint_fixture.h"
#include "test_support.h"
#include "util/error.h"
#include "util/log.h"

using Catch::Matchers::Contains;
using nmt::checkpoint::CheckpointDir;
using nmt::checkpoint::CheckpointOptions;
using nmt::test::file_names;
using nmt::test::small_checkpoint;
using nmt::test::TempDir;

namespace {

CheckpointOptions keep(int64_t last, int64_t best) {
  CheckpointOptions options;
  options.keep_last = last;
  options.keep_best = best;
  return options;
}

std::vector<std::string> names(const std::vector<std::filesystem::path>& files) {
  std::vector<std::string> out;
  for (const auto& file : files) out.push_back(file.filename().string());
  return out;
}

}  // namespace

TEST_CASE("checkpoint names carry the zero-padded step", "[checkpoint]") {
  CheckpointDir dir("/run/checkpoints", CheckpointOptions{});
  CHECK(dir.path_for_step(42) == "/run/checkpoints/checkpoint-00000042.safetensors");
  CHECK(dir.path_for_step(123456789) == "/run/checkpoints/checkpoint-123456789.safetensors");
  using nmt::checkpoint::step_of_checkpoint_file;
  CHECK(step_of_checkpoint_file("/x/checkpoint-00000042.safetensors") == 42);
  CHECK(step_of_checkpoint_file("checkpoint-123456789.safetensors") == 123456789);
  CHECK_FALSE(step_of_checkpoint_file("checkpoint-00000042.safetensors.tmp-77"));
  CHECK_FALSE(step_of_checkpoint_file("checkpoint-.safetensors"));
  CHECK_FALSE(step_of_checkpoint_file("checkpoint-12a.safetensors"));
  CHECK_FALSE(step_of_checkpoint_file("model.safetensors"));
  CHECK_THROWS_AS(CheckpointDir("/x", keep(-1, 1)), nmt::ConfigError);
}

TEST_CASE("list: checkpoint files only, newest step first", "[checkpoint]") {
  TempDir tmp;
  CheckpointDir dir(tmp.path() / "checkpoints", keep(10, 0));
  CHECK(dir.list().empty());  // the folder does not exist yet
  CHECK_FALSE(dir.load_newest_valid());
  CHECK_FALSE(dir.best_or_last());
  for (int64_t step : {100, 20, 3000}) dir.save(step, small_checkpoint(1));
  tmp.write("checkpoints/checkpoint-00009999.safetensors.tmp-12345", "half written");
  tmp.write("checkpoints/notes.txt", "not a checkpoint");
  CHECK(names(dir.list()) == std::vector<std::string>{"checkpoint-00003000.safetensors",
                                                      "checkpoint-00000100.safetensors",
                                                      "checkpoint-00000020.safetensors"});
  // The next save removes the crashed save's temp file and leaves other files alone.
  dir.save(3001, small_checkpoint(1));
  CHECK(file_names(dir.dir()) ==
        std::vector<std::string>{
            "checkpoint-00000020.safetensors", "checkpoint-00000100.safetensors",
            "checkpoint-00003000.safetensors", "checkpoint-00003001.safetensors", "notes.txt"});
  CHECK(nmt::is_temp_file_name("checkpoint-00000001.safetensors.tmp-1"));
  CHECK_FALSE(nmt::is_temp_file_name("checkpoint-00000001.safetensors.tmp-"));
}

TEST_CASE("retention keeps the newest keep_last and the keep_best lowest valid_loss",
          "[checkpoint]") {
  TempDir tmp;
  CheckpointDir dir(tmp.path() / "checkpoints", keep(2, 1));
  const auto loss = [](const char* value) {
    return std::map<std::string, std::string>{{"selection", value}};
  };
  dir.save(1, small_checkpoint(1, loss("3.0")));
  dir.save(2, small_checkpoint(2, loss("1.0")));  // the best
  dir.save(3, small_checkpoint(3, loss("2.0")));
  CHECK(names(dir.list()) == std::vector<std::string>{"checkpoint-00000003.safetensors",
                                                      "checkpoint-00000002.safetensors"});
  dir.save(4, small_checkpoint(4));  // no valid_loss: never "best"
  dir.save(5, small_checkpoint(5, loss("2.5")));
  CHECK(names(dir.list()) == std::vector<std::string>{"checkpoint-00000005.safetensors",
                                                      "checkpoint-00000004.safetensors",
                                                      "checkpoint-00000002.safetensors"});
  CHECK(dir.best_or_last() == dir.path_for_step(2));
  const auto written = dir.save(6, small_checkpoint(6, loss("0.5")));  // a new best
  CHECK(written == dir.path_for_step(6));
  CHECK(names(dir.list()) == std::vector<std::string>{"checkpoint-00000006.safetensors",
                                                      "checkpoint-00000005.safetensors"});
  CHECK(dir.best_or_last() == dir.path_for_step(6));
  // A diverged validation's NaN is never the best (it broke the sort's strict ordering).
  dir.save(7, small_checkpoint(7, loss("nan")));
  dir.save(8, small_checkpoint(8, loss("nan")));
  CHECK(names(dir.list()) == std::vector<std::string>{"checkpoint-00000008.safetensors",
                                                      "checkpoint-00000007.safetensors",
                                                      "checkpoint-00000006.safetensors"});
  CHECK(dir.best_or_last() == dir.path_for_step(6));  // the newest NaN was taken as the best
}

TEST_CASE("retention never deletes the checkpoint just written", "[checkpoint]") {
  TempDir tmp;
  CheckpointDir dir(tmp.path() / "checkpoints", keep(0, 0));
  dir.save(1, small_checkpoint(1));
  dir.save(2, small_checkpoint(2));
  CHECK(names(dir.list()) == std::vector<std::string>{"checkpoint-00000002.safetensors"});
  // Saving an older step than the newest (e.g. after a rollback) keeps it, too.
  CheckpointDir dir2(tmp.path() / "checkpoints", keep(1, 0));
  dir2.save(1, small_checkpoint(1));
  CHECK(names(dir2.list()) == std::vector<std::string>{"checkpoint-00000002.safetensors",
                                                       "checkpoint-00000001.safetensors"});
}

TEST_CASE("set_aside_after moves the later checkpoints into a folder of their own",
          "[checkpoint]") {
  // Left in place, a run restarted from step 2 (or from scratch) beside checkpoints of steps
  // 3 and 4 lost its own saves to retention, and a resume would have taken step 4.
  TempDir tmp;
  CheckpointDir dir(tmp.path() / "checkpoints", keep(10, 0));
  CHECK_FALSE(dir.set_aside_after(0));  // no folder yet
  for (int64_t step : {1, 2, 3, 4}) dir.save(step, small_checkpoint(step));
  tmp.write("checkpoints/notes.txt", "mine");
  CHECK_FALSE(dir.set_aside_after(4));
  const auto folder = dir.set_aside_after(2);
  REQUIRE(folder);
  CHECK(folder->parent_path() == dir.dir());
  CHECK_THAT(folder->filename().string(), Catch::Matchers::StartsWith("superseded-"));
  CHECK(file_names(*folder) == std::vector<std::string>{"checkpoint-00000003.safetensors",
                                                        "checkpoint-00000004.safetensors"});
  CHECK(names(dir.list()) == std::vector<std::string>{"checkpoint-00000002.safetensors",
                                                      "checkpoint-00000001.safetensors"});
  // The new run's saves are the newest now.
  dir.save(3, small_checkpoint(30));
  CHECK(dir.list().front() == dir.path_for_step(3));
  // From scratch: every checkpoint goes, into a folder of its own; other files stay.
  const auto second = dir.set_aside_after(0);
  REQUIRE(second);
  CHECK(*second != *folder);
  CHECK(file_names(*second) == std::vector<std::string>{"checkpoint-00000001.safetensors",
                                                        "checkpoint-00000002.safetensors",
                                                        "checkpoint-00000003.safetensors"});
  CHECK(dir.list().empty());
  CHECK(std::filesystem::exists(dir.dir() / "notes.txt"));
  CHECK(file_names(*folder).size() == 2);
}

TEST_CASE("best_or_last: lowest valid_loss, else the newest", "[checkpoint]") {
  TempDir tmp;
  CheckpointDir dir(tmp.path() / "checkpoints", keep(10, 10));
  dir.save(10, small_checkpoint(1));
  dir.save(20, small_checkpoint(2));
  CHECK(dir.best_or_last() == dir.path_for_step(20));
  dir.save(30, small_checkpoint(3, {{"selection", "not a number"}}));
  CHECK(dir.best_or_last() == dir.path_for_step(30));
  dir.save(40, small_checkpoint(4, {{"selection", "4.5"}}));
  dir.save(50, small_checkpoint(5, {{"selection", "4.25"}}));
  dir.save(60, small_checkpoint(6, {{"selection", "4.25"}}));  // a tie: the earlier stays best
  dir.save(70, small_checkpoint(7, {{"selection", "6"}}));
  CHECK(dir.best_or_last() == dir.path_for_step(50));
}

TEST_CASE("load_newest_valid skips a damaged newest checkpoint, saying why", "[checkpoint]") {
  TempDir tmp;
  CheckpointDir dir(tmp.path() / "checkpoints", keep(5, 0));
  dir.save(100, small_checkpoint(1, {{"step", "100"}}));
  dir.save(200, small_checkpoint(2, {{"step", "200"}}));
  const auto newest = dir.save(300, small_checkpoint(3, {{"step", "300"}}));
  nmt::test::truncate_file(newest, std::filesystem::file_size(newest) - 7);

  const auto log_file = tmp.path() / "log.txt";
  nmt::log::init(nmt::log::LogOptions{});
  nmt::log::add_file_sink(log_file);
  const auto found = dir.load_newest_valid();
  nmt::log::shutdown();
  nmt::log::init(nmt::log::LogOptions{});
  REQUIRE(found);
  CHECK(found->first == dir.path_for_step(200));
  CHECK(found->second.meta("step") == "200");
  CHECK(found->second.at("model.weight")[0][0].item<float>() == 2.0f);
  CHECK_THAT(nmt::test::read_file(log_file),
             Contains("[checkpoint] skipping " + newest.string() + ": truncated: "));
  // A damaged header is passed over by best_or_last too.
  CHECK(dir.best_or_last() == dir.path_for_step(200));

  // Nothing valid at all: nullopt, not an exception.
  for (const auto& file : dir.list())
    nmt::test::flip_byte(file, std::filesystem::file_size(file) - 1);
  CHECK_FALSE(dir.load_newest_valid());
}
