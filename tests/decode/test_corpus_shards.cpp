#include "catch_torch.h"  // first: see the header

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "decode/corpus_shards.h"
#include "decode/corpus_translation.h"
#include "test_support.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::decode::Manifest;
using nmt::decode::ShardFolder;
using nmt::decode::ShardRecord;
using nmt::test::read_file;
using nmt::test::TempDir;
namespace fs = std::filesystem;

namespace {

Manifest manifest(const std::string& beam) {
  return {{"input", "/data/in.en"}, {"beam", beam}, {"shard_lines", "3"}};
}

ShardRecord record(int64_t rank, int64_t lines) { return {rank, "run A", lines, 7, 5, 0.5}; }

}  // namespace

TEST_CASE("corpus manifests name the keys that differ", "[decode][corpus]") {
  const Manifest a = manifest("4");
  CHECK(nmt::decode::manifest_differences(a, a).empty());
  CHECK(nmt::decode::manifest_differences(a, manifest("1")) == std::vector<std::string>{"beam"});
  Manifest extra = a;
  extra.emplace_back("tgt_lang", "de");
  CHECK(nmt::decode::manifest_differences(a, extra) == std::vector<std::string>{"tgt_lang"});
  CHECK(nmt::decode::parse_manifest(nmt::decode::manifest_json(extra), "m") == extra);
  CHECK_THROWS_WITH(nmt::decode::parse_manifest("{\"beam\": 4}", "m.json"),
                    Contains("m.json: key \"beam\": expected a string"));
}

TEST_CASE("a scoring job's manifest differs from a translation's by its mode and targets",
          "[decode][corpus]") {
  TempDir dir;
  nmt::decode::CorpusOptions corpus;
  corpus.input = dir.write("in.en", "a\n").string();
  corpus.output = (dir.path() / "out").string();
  const nmt::decode::TranslateOptions options;
  const std::vector<nmt::decode::ModelSource> checkpoints{{{dir.write("c.safetensors", "x")}}};
  const Manifest translation = nmt::decode::corpus_manifest(corpus, options, checkpoints);
  corpus.targets = dir.write("in.de", "b\n").string();
  const Manifest scoring = nmt::decode::corpus_manifest(corpus, options, checkpoints);
  CHECK(nmt::decode::manifest_differences(scoring, translation) ==
        std::vector<std::string>{"mode", "targets", "targets_file"});
  corpus.targets = dir.write("other.de", "b\n").string();
  const std::vector<std::string> other = nmt::decode::manifest_differences(
      scoring, nmt::decode::corpus_manifest(corpus, options, checkpoints));
  REQUIRE_FALSE(other.empty());
  CHECK(other.front() == "targets");  // and targets_file, unless written in the same instant
}

TEST_CASE("an ensemble's manifest names each model's checkpoints and the weights",
          "[decode][corpus]") {
  using nmt::decode::ModelSource;
  TempDir dir;
  nmt::decode::CorpusOptions corpus;
  corpus.input = dir.write("in.en", "a\n").string();
  corpus.output = (dir.path() / "out").string();
  const nmt::decode::TranslateOptions options;
  const fs::path a = dir.write("a.safetensors", "a"), b = dir.write("b.safetensors", "b");
  const auto manifest_of = [&](const std::vector<ModelSource>& models) {
    return nmt::decode::corpus_manifest(corpus, options, models);
  };
  const Manifest one = manifest_of({{{a}}});
  const Manifest two = manifest_of({{{a}, 0.5}, {{b}, 0.5}});
  CHECK(nmt::decode::manifest_differences(two, one) ==
        std::vector<std::string>{"model0_checkpoint", "model1_checkpoint", "ensemble_weights",
                                 "checkpoint"});
  CHECK(nmt::decode::manifest_differences(two, manifest_of({{{a}, 0.75}, {{b}, 0.25}})) ==
        std::vector<std::string>{"ensemble_weights"});
  CHECK(nmt::decode::manifest_differences(two, manifest_of({{{b}, 0.5}, {{a}, 0.5}})) ==
        std::vector<std::string>{"model0_checkpoint", "model1_checkpoint"});
  // A model averaged from two files: a key per file.
  const Manifest averaged = manifest_of({{{a, b}, 0.5}, {{b}, 0.5}});
  CHECK(nmt::decode::manifest_differences(two, averaged) ==
        std::vector<std::string>{"model0_checkpoint", "model0_checkpoint0", "model0_checkpoint1"});
  for (const auto& [key, value] : two)
    if (key == "ensemble_weights") CHECK(value == "0.5 0.5");
}

TEST_CASE("shard file names and the temps of dead writers", "[decode][corpus]") {
  CHECK(nmt::decode::shard_file_name(12, "txt") == "shard-00000012.txt");
  CHECK(nmt::decode::is_shard_file_name("shard-00000012.txt"));
  CHECK(nmt::decode::is_shard_file_name("shard-00000012.json"));
  CHECK_FALSE(nmt::decode::is_shard_file_name("shard-00000012.lock"));
  CHECK_FALSE(nmt::decode::is_shard_file_name("shard-12.txt"));
  CHECK_FALSE(nmt::decode::is_shard_file_name("manifest.json"));
  CHECK(nmt::decode::parts_folder("out/de.txt") == fs::path("out/de.txt.parts"));

  TempDir dir;
  const fs::path out = dir.path() / "out.de";
  const fs::path parts = nmt::decode::parts_folder(out);
  fs::create_directories(parts);
  // A writer killed mid-shard (no such pid) and a live one (this test's parent is alive).
  const auto dead = dir.write("out.de.parts/shard-00000001.txt.tmp-2147480000", "half");
  const auto live =
      dir.write("out.de.parts/shard-00000002.txt.tmp-" + std::to_string(::getppid()), "writing");
  ShardFolder folder(out, manifest("4"), false, true);
  CHECK_FALSE(fs::exists(dead));
  CHECK(fs::exists(live));
}

TEST_CASE("a corpus folder keeps shards, resumes them and assembles the output",
          "[decode][corpus]") {
  TempDir dir;
  const fs::path out = dir.path() / "out.de";
  {
    ShardFolder folder(out, manifest("4"), false, false);
    auto claim = folder.claim(1, false);
    REQUIRE(claim);
    // Held: nobody else claims it, not even this process through another open file.
    CHECK_FALSE(folder.claim(1, false));
    folder.commit(1, "d\ne\nf\n", record(1, 3));
  }
  // Resumed with the same manifest: shard 1 is done and kept; another manifest is refused,
  // naming what differs, unless forced.
  ShardFolder again(out, manifest("4"), false, false);
  CHECK(again.done(1));
  CHECK_FALSE(again.claim(1, true));
  CHECK_THROWS_AS(ShardFolder(out, manifest("1"), false, false), nmt::ConfigError);
  CHECK_THROWS_WITH(ShardFolder(out, manifest("1"), false, false),
                    Contains("(beam differs)") && Contains("--force"));
  {
    ShardFolder forced(out, manifest("1"), true, false);
    CHECK_FALSE(forced.done(1));
  }
  ShardFolder folder(out, manifest("1"), false, false);
  folder.commit(0, "a\nb\nc\n", record(0, 3));
  folder.commit(1, "d\ne\nf\n", record(1, 3));
  folder.commit(2, "g\n", record(0, 1));
  const std::vector<ShardRecord> records = folder.records(3);
  REQUIRE(records.size() == 3);
  CHECK(records[1].rank == 1);
  CHECK(records[2].lines == 1);
  CHECK(records[2].run == "run A");
  folder.assemble(out, 3);
  CHECK(read_file(out) == "a\nb\nc\nd\ne\nf\ng\n");
  CHECK_FALSE(fs::exists(nmt::decode::parts_folder(out)));
}

TEST_CASE("shard lines: as given, as the resumed run's, or one shard per worker",
          "[corpus_shards]") {
  using nmt::decode::shard_lines_for;
  CHECK(shard_lines_for(5, 23, 2, std::nullopt) == 5);
  CHECK(shard_lines_for(5, 23, 2, 7) == 5);
  CHECK(shard_lines_for(20000, 5000, 1, std::nullopt) == 20000);
  // Automatic: every worker of a job gets a shard, up to 10,000 lines.
  CHECK(shard_lines_for(0, 5000, 1, std::nullopt) == 5000);
  CHECK(shard_lines_for(0, 5000, 2, std::nullopt) == 2500);
  CHECK(shard_lines_for(0, 23, 2, std::nullopt) == 12);
  CHECK(shard_lines_for(0, 1000000, 8, std::nullopt) == 10000);
  CHECK(shard_lines_for(0, 0, 2, std::nullopt) == 1);
  // A resumed run keeps its size, on any number of workers.
  CHECK(shard_lines_for(0, 5000, 1, 2500) == 2500);
}

TEST_CASE("shard lines: the size a folder's manifest records", "[corpus_shards]") {
  using nmt::decode::stored_shard_lines;
  TempDir dir;
  const fs::path output = dir.path() / "out.de";
  CHECK_FALSE(stored_shard_lines(output));
  ShardFolder folder(output, manifest("4"), false, true);
  CHECK(stored_shard_lines(output) == 3);
  std::ofstream(fs::path(output.string() + ".parts") / "manifest.json") << "not json";
  CHECK_FALSE(stored_shard_lines(output));
}
