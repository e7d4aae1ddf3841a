// util/atomic_file: the atomic writer that checkpoints, metrics files and TensorBoard events
// share (moved from checkpoint/, which tensorboard_log and metrics_log had to borrow it from).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "test_support.h"
#include "util/atomic_file.h"
#include "util/error.h"

using nmt::AtomicFileWriter;
using nmt::test::read_file;
using nmt::test::TempDir;

namespace {

int file_count(const std::filesystem::path& folder) {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(folder)) ++n;
  return n;
}

}  // namespace

TEST_CASE("a committed write replaces the target and leaves no temp file", "[atomic_file]") {
  TempDir tmp;
  const auto target = tmp.write("metrics.jsonl", "old\n");
  AtomicFileWriter writer(target);
  CHECK(std::filesystem::exists(nmt::temp_path_for(target)));
  writer.write("new ", 4);
  const std::string large(512 << 10, 'x');  // past the buffer's direct-write size
  writer.write(large.data(), large.size());
  CHECK(read_file(target) == "old\n");  // nothing visible before commit
  writer.commit();
  CHECK(read_file(target) == "new " + large);
  CHECK(file_count(tmp.path()) == 1);
}

TEST_CASE("a write that is not committed leaves the target as it was", "[atomic_file]") {
  TempDir tmp;
  const auto target = tmp.write("metrics.jsonl", "old\n");
  {
    AtomicFileWriter writer(target);
    writer.write("half", 4);
  }
  CHECK(read_file(target) == "old\n");
  CHECK(file_count(tmp.path()) == 1);
}

TEST_CASE("a replaced file keeps its permission bits", "[atomic_file]") {
  TempDir tmp;
  const auto target = tmp.write("summary.json", "{}");
  REQUIRE(::chmod(target.c_str(), 0640) == 0);
  AtomicFileWriter writer(target);
  writer.write("[]", 2);
  writer.commit();
  struct stat st {};
  REQUIRE(::stat(target.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
}

TEST_CASE("a writer whose folder is missing throws naming the target", "[atomic_file]") {
  TempDir tmp;
  const auto target = tmp.path() / "no-such-folder" / "file";
  CHECK_THROWS_AS(AtomicFileWriter(target), nmt::CheckpointError);
  CHECK_THROWS_WITH(AtomicFileWriter(target), Catch::Contains(target.string()));
}

TEST_CASE("temp names carry the writer's pid, and dead writers' temps are removed",
          "[atomic_file]") {
  CHECK(nmt::temp_path_for("a/b.json").string() == "a/b.json.tmp-" + std::to_string(::getpid()));
  // A folder named with a trailing separator: the temp is beside it, not inside it (export-hf
  // to "out/" staged in "out/.tmp-<pid>" and deleted it with the old "out").
  CHECK(nmt::temp_path_for("a/out/").string() == "a/out.tmp-" + std::to_string(::getpid()));
  CHECK(nmt::temp_path_for("a/out//").string() == "a/out.tmp-" + std::to_string(::getpid()));
  CHECK(nmt::temp_file_pid("b.json.tmp-123") == 123);
  CHECK_FALSE(nmt::temp_file_pid("b.json.tmp-12x").has_value());
  CHECK_FALSE(nmt::is_temp_file_name(".tmp-1"));  // no base
  TempDir tmp;
  // This process's own temps count as dead (a caller cleans up before it writes).
  const auto ours = tmp.write("b.json.tmp-" + std::to_string(::getpid()), "x");
  const auto other = tmp.write("c.json.tmp-" + std::to_string(::getpid()), "x");
  const auto removed =
      nmt::remove_dead_temps(tmp.path(), [](std::string_view base) { return base == "b.json"; });
  REQUIRE(removed.size() == 1);
  CHECK(removed[0] == ours);
  CHECK_FALSE(std::filesystem::exists(ours));
  CHECK(std::filesystem::exists(other));
}
