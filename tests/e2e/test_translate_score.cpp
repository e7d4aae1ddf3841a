// End-to-end: nmt-translate --score TGT scores given pairs teacher-forced (decode/pair_scoring.h),
// one "SUM<TAB>MEAN<TAB>TOKENS" line per pair; on two ranks it writes the file of one process,
// files of different line counts are refused, and the corpus mean equals the validation nll that
// nmt-train logs for the same pairs and checkpoint of the shared tiny run (translate_support.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "translate_support.h"

using Catch::Matchers::Contains;
using nmt::test::lines_of;
using nmt::test::read_file;
using nmt::test::run_command;
using nmt::test::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kTranslate = NMT_TRANSLATE_BIN;
constexpr int kPairs = 23;

std::string score_checkpoint() {
  return (nmt::test::translate_run_dir() / "checkpoints" / "checkpoint-00000020.safetensors")
      .string();
}

/// The first `count` lines of a shipped file, written into dir as `name`.
fs::path head_of(const TempDir& dir, const std::string& shipped, int count,
                 const std::string& name) {
  std::ifstream in(shipped);
  std::string text, line;
  for (int n = 0; n < count && std::getline(in, line); ++n) text += line + "\n";
  return dir.write(name, text);
}

struct Score {
  double sum = 0, mean = 0;
  int64_t tokens = 0;
};

std::vector<Score> parse_scores(const std::string& text) {
  std::vector<Score> out;
  for (const std::string& line : lines_of(text)) {
    std::istringstream fields(line);
    Score s;
    REQUIRE(fields >> s.sum >> s.mean >> s.tokens);
    out.push_back(s);
  }
  return out;
}

nmt::test::CommandResult translate(const std::string& args) {
  return run_command(kTranslate + " --device cpu --log-level warn " + args);
}

void translate_ok(const std::string& args) {
  const auto r = translate(args);
  INFO("nmt-translate " << args << "\n" << r.err);
  REQUIRE(r.exit_code == 0);
}

}  // namespace

TEST_CASE("nmt-translate --score writes sum, mean and tokens per pair", "[e2e][translate][score]") {
  const std::string checkpoint = score_checkpoint();
  TempDir dir;
  const fs::path src = head_of(dir, "data/ddtp.en-de.test.en", kPairs, "in.en");
  const fs::path tgt = head_of(dir, "data/ddtp.en-de.test.de", kPairs, "in.de");
  const fs::path out = dir.path() / "scores";
  translate_ok("-c " + checkpoint + " -i " + src.string() + " --score " + tgt.string() + " -o " +
               out.string());
  const std::vector<Score> scores = parse_scores(read_file(out));
  REQUIRE(scores.size() == size_t(kPairs));
  for (const Score& s : scores) {
    CHECK(s.sum < 0);
    CHECK(s.tokens >= 2);
    CHECK(s.mean == Approx(s.sum / double(s.tokens)).margin(2e-6));
  }
  // A pair scored alone scores as in the corpus (its own batch: other padding).
  const fs::path one_src = head_of(dir, "data/ddtp.en-de.test.en", 1, "one.en");
  const fs::path one_tgt = head_of(dir, "data/ddtp.en-de.test.de", 1, "one.de");
  const auto one =
      translate("-c " + checkpoint + " -i " + one_src.string() + " --score " + one_tgt.string());
  REQUIRE(one.exit_code == 0);
  CHECK(parse_scores(one.out).at(0).sum == Approx(scores[0].sum).epsilon(1e-5));
}

TEST_CASE("nmt-translate --score refuses files of different line counts",
          "[e2e][translate][score]") {
  TempDir dir;
  const fs::path src = head_of(dir, "data/ddtp.en-de.test.en", 5, "in.en");
  const fs::path tgt = head_of(dir, "data/ddtp.en-de.test.de", 4, "in.de");
  for (const std::string& corpus :
       std::vector<std::string>{"", " --nproc-per-node 1 -o " + (dir.path() / "o").string()}) {
    const auto r = translate("-c " + score_checkpoint() + " -i " + src.string() + " --score " +
                             tgt.string() + corpus);
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains(src.string() + " has 5 lines but " + tgt.string() + " has 4"));
  }
  const auto sampled =
      translate("-c x -i " + src.string() + " --score " + tgt.string() + " --sampling topk:5");
  CHECK(sampled.exit_code == 2);
  CHECK_THAT(sampled.err, Contains("--sampling and --nbest do not apply"));
}

TEST_CASE("nmt-translate --score --nproc-per-node 2 writes the file of one process",
          "[e2e][translate][score]") {
  const std::string checkpoint = score_checkpoint();
  TempDir dir;
  const fs::path src = head_of(dir, "data/ddtp.en-de.test.en", kPairs, "in.en");
  const fs::path tgt = head_of(dir, "data/ddtp.en-de.test.de", kPairs, "in.de");
  // The same shards (batches) on one thread each: the same sums to the last digit.
  const std::string base = "-c " + checkpoint + " -i " + src.string() + " --score " + tgt.string() +
                           " --shard-lines 5 --threads 1 -o ";
  const fs::path one = dir.path() / "one", two = dir.path() / "two";
  const fs::path stats = dir.path() / "stats.json";
  translate_ok(base + one.string() + " --nproc-per-node 1");
  translate_ok(base + two.string() + " --nproc-per-node 2 --stats-json " + stats.string());
  CHECK(read_file(two) == read_file(one));
  CHECK(lines_of(read_file(two)).size() == size_t(kPairs));
  const auto o = nlohmann::json::parse(read_file(stats));
  CHECK(o["sentences"] == kPairs);
  int64_t tokens = 0;
  for (const Score& s : parse_scores(read_file(two))) tokens += s.tokens;
  CHECK(o["output_tokens"] == tokens);
}

TEST_CASE("the corpus mean of nmt-translate --score is the validation nll of nmt-train",
          "[e2e][translate][score]") {
  // A copy of the shared run resumes for one update (nmt-train does nothing at its last step)
  // with these pairs as the validation set, which it validates at step 21 and saves; --score
  // scores them with that checkpoint. Short pairs, so that data.max_len filters none.
  TempDir dir;
  // Pairs of the validation set whose sides have at most 150 bytes (data.max_len 128 pieces
  // filters 2 of the first 40 otherwise, which --score would count).
  std::ifstream en("data/ddtp.en-de.valid.en"), de("data/ddtp.en-de.valid.de");
  std::string en_text, de_text, en_line, de_line;
  for (int n = 0; n < 40 && std::getline(en, en_line) && std::getline(de, de_line);) {
    if (en_line.size() > 150 || de_line.size() > 150) continue;
    en_text += en_line + "\n";
    de_text += de_line + "\n";
    ++n;
  }
  const fs::path src = dir.write("valid.en", en_text);
  const fs::path tgt = dir.write("valid.de", de_text);
  const fs::path run = dir.path() / "run";
  fs::copy(nmt::test::translate_run_dir(), run, fs::copy_options::recursive);
  const auto trained = run_command(
      std::string(NMT_TRAIN_BIN) +
      " --config configs/tiny.yaml --log-level warn --set run_dir=" + run.string() +
      " --set train.max_steps=21 --set data.vocab_size=500 --set train.valid_every=21"
      " --set checkpoint.every_steps=10 --set data.valid_src=" +
      src.string() + " --set data.valid_tgt=" + tgt.string() + nmt::test::train_slice_flags());
  INFO(trained.err);
  REQUIRE(trained.exit_code == 0);
  nlohmann::json valid;
  for (const std::string& line : lines_of(read_file(run / "metrics.jsonl"))) {
    const auto record = nlohmann::json::parse(line);
    if (record.value("type", "") == "valid") valid = record;
  }
  REQUIRE(valid.is_object());
  REQUIRE(valid["step"] == 21);
  const std::string checkpoint = (run / "checkpoints" / "checkpoint-00000021.safetensors").string();

  const fs::path out = dir.path() / "scores";
  translate_ok("-c " + checkpoint + " -i " + src.string() + " --score " + tgt.string() + " -o " +
               out.string());
  double sum = 0;
  int64_t tokens = 0;
  for (const Score& s : parse_scores(read_file(out))) {
    sum += s.sum;
    tokens += s.tokens;
  }
  // The same target tokens (EOS included), and the same per-token nll (not the label-smoothed
  // "loss"): float32 sums per batch there, double here, 6 decimals per line.
  CHECK(valid["tokens"] == tokens);
  CHECK(-sum / double(tokens) == Approx(valid["nll"].get<double>()).epsilon(1e-4));
}
