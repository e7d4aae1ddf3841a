#include "catch_torch.h"  // first: see the header

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <sentencepiece_processor.h>

#include "config/stored_config.h"
#include "decode/tiny_run.h"
#include "decode/translator.h"
#include "test_support.h"
#include "util/error.h"

using nmt::decode::TranslateOptions;
using nmt::decode::Translation;
using nmt::decode::Translator;
using nmt::test::TempDir;
using nmt::test::TinyRun;
using nmt::test::TinyVocab;

namespace {

TranslateOptions options_for(const std::filesystem::path& checkpoint, int64_t beam = 1) {
  TranslateOptions o;
  o.checkpoints = {checkpoint.string()};
  o.device = nmt::decode::DeviceChoice::kCpu;
  o.search.beam = beam;
  o.search.max_len_b = 5;
  return o;
}

std::vector<std::string> texts(const std::vector<std::vector<Translation>>& result) {
  std::vector<std::string> out;
  for (const auto& r : result) out.push_back(r.at(0).text);
  return out;
}

const std::vector<std::string> kLines = {
    "This package contains the documentation.",
    "",
    "   ",
    "A library for reading files.",
    "Install it.",
    "",
    "The command-line tool and the shared library of the project"};

}  // namespace

TEST_CASE("every input line gives one output line, empty lines stay empty",
          "[decode][translator]") {
  TinyRun run;
  const auto file = run.save(10, 1);
  Translator translator(options_for(file), nmt::config::stored_model_options);
  REQUIRE(translator.models().size() == 1);
  CHECK(translator.models()[0].files == std::vector<std::filesystem::path>{file});
  CHECK(translator.models()[0].weight == 1);
  const auto result = translator.translate(kLines);
  REQUIRE(result.size() == kLines.size());
  for (size_t i = 0; i < kLines.size(); ++i) {
    REQUIRE(result[i].size() == 1);
    const bool blank = kLines[i].find_first_not_of(' ') == std::string::npos;
    if (blank) {
      CHECK(result[i][0].text.empty());
      CHECK(result[i][0].score == 0);
    } else {
      CHECK(result[i][0].score < 0);
    }
  }
  // Batch size (max_tokens) and order do not change a line's translation.
  TranslateOptions one_by_one = options_for(file);
  one_by_one.max_tokens = 1;
  Translator small_batches(one_by_one, nmt::config::stored_model_options);
  CHECK(texts(small_batches.translate(kLines)) == texts(result));
  CHECK(translator.translate({}).empty());
}

TEST_CASE("invalid UTF-8 is an error naming the line", "[decode][translator]") {
  TinyRun run;
  const auto file = run.save(10, 1);
  Translator translator(options_for(file), nmt::config::stored_model_options);
  CHECK_THROWS_AS(translator.translate({"fine", "", "bad \xff byte"}), nmt::DataError);
  CHECK_THROWS_WITH(translator.translate({"fine", "", "bad \xff byte"}),
                    Catch::Contains("line 3") && Catch::Contains("invalid UTF-8"));
  TempDir io;
  const auto input = io.write("in.txt", "fine\nalso fine\n\xc3\x28 broken\n");
  CHECK_THROWS_WITH(translator.translate_file(input.string(), (io.path() / "out.txt").string()),
                    Catch::Contains(input.string() + ":3: invalid UTF-8"));
}

TEST_CASE("translate_file writes n-best lists with scores, in input order",
          "[decode][translator]") {
  TinyRun run;
  const auto file = run.save(10, 2);
  TranslateOptions o = options_for(file, 4);
  o.search.nbest = 3;
  o.with_scores = true;
  Translator translator(o, nmt::config::stored_model_options);
  TempDir io;
  std::string text;
  for (const auto& line : kLines) text += line + "\n";
  const auto input = io.write("in.txt", text);
  const auto output = io.path() / "out.txt";
  const auto stats = translator.translate_file(input.string(), output.string());
  CHECK(stats.sentences == int64_t(kLines.size()));
  std::ifstream in(output);
  std::vector<std::string> out_lines;
  for (std::string line; std::getline(in, line);) out_lines.push_back(line);
  REQUIRE(out_lines.size() == 3 * kLines.size());
  const auto expected = translator.translate(kLines);
  for (size_t i = 0; i < kLines.size(); ++i) {
    double previous = 1;
    for (size_t k = 0; k < 3; ++k) {
      const std::string& line = out_lines[3 * i + k];
      const size_t tab = line.rfind('\t');
      REQUIRE(tab != std::string::npos);
      CHECK(line.substr(0, tab) == expected[i][k].text);
      const double score = std::stod(line.substr(tab + 1));
      CHECK(score <= previous);
      previous = score;
    }
  }
}

TEST_CASE("a run directory gives its best checkpoint, or the average of the newest",
          "[decode][translator]") {
  TinyRun run;
  const auto best = run.save(10, 3, "1.5");
  const auto worse = run.save(20, 4, "2.5");
  const auto newest = run.save(30, 4);  // same weights as step 20
  Translator from_dir(options_for(run.path()), nmt::config::stored_model_options);
  CHECK(from_dir.models().at(0).files == std::vector<std::filesystem::path>{best});
  Translator from_best(options_for(best), nmt::config::stored_model_options);
  CHECK(texts(from_dir.translate(kLines)) == texts(from_best.translate(kLines)));

  // The average of two equal checkpoints is that checkpoint.
  TranslateOptions averaged = options_for(run.path() / "checkpoints");
  averaged.average = 2;
  Translator from_average(averaged, nmt::config::stored_model_options);
  CHECK(from_average.models().at(0).files == std::vector<std::filesystem::path>{worse, newest});
  Translator from_newest(options_for(newest), nmt::config::stored_model_options);
  const auto a = from_average.translate(kLines);
  const auto b = from_newest.translate(kLines);
  for (size_t i = 0; i < kLines.size(); ++i) {
    CHECK(a[i][0].tokens == b[i][0].tokens);
    CHECK(a[i][0].score == Approx(b[i][0].score).margin(1e-5));
  }

  averaged.average = 4;
  CHECK_THROWS_WITH(Translator(averaged, nmt::config::stored_model_options),
                    Catch::Contains("--average 4 needs 4 checkpoints, found 3"));
  TranslateOptions missing = options_for(run.path() / "nope");
  CHECK_THROWS_AS(Translator(missing, nmt::config::stored_model_options), nmt::CheckpointError);
}

TEST_CASE("a checkpoint from before the fused attention projections translates as then",
          "[decode][translator]") {
  // tests/train/data/legacy-d6612cb.safetensors has separate q/k/v projections; load_checkpoint
  // fuses them. The expected lines are what nmt-translate built at 7b6366d (separate
  // projections) wrote for it: nmt-translate -c legacy-d6612cb.safetensors --beam 3 --nbest 2
  // --max-len-a 0 --max-len-b 8 --weights raw|ema on the first 4 lines of data/ddtp.en-de.valid.en.
  const std::filesystem::path legacy =
      std::filesystem::path(NMT_SOURCE_DIR) / "tests/train/data/legacy-d6612cb.safetensors";
  std::vector<std::string> lines;
  {
    std::ifstream in(std::string(NMT_SOURCE_DIR) + "/data/ddtp.en-de.valid.en");
    for (std::string line; lines.size() < 4 && std::getline(in, line);) lines.push_back(line);
  }
  struct Expected {
    std::string text;
    double score;
  };
  const auto check = [&](nmt::decode::WeightsChoice weights, const std::vector<Expected>& expected) {
    TranslateOptions o = options_for(legacy, 3);
    o.search.nbest = 2;
    o.search.max_len_a = 0;
    o.search.max_len_b = 8;
    o.weights = weights;
    Translator translator(o, nmt::config::stored_model_options);
    const auto result = translator.translate(lines);
    REQUIRE(result.size() == 4);
    for (size_t i = 0; i < expected.size(); ++i) {
      const Translation& got = result[i / 2].at(i % 2);
      INFO("line " << i / 2 << " hypothesis " << i % 2);
      CHECK(got.text == expected[i].text);
      // Recorded on one CPU and printed with 6 decimals. A sequence's float32 score differs
      // across CPUs' kernels (and with the fused projections) by a few 1e-7 relative per
      // step: an AMD EPYC gave -10.1061091 for -10.106107. So relative 1e-5, not the digits.
      CHECK_THAT(got.normalized_score, Catch::Matchers::WithinRel(expected[i].score, 1e-5));
    }
  };
  check(nmt::decode::WeightsChoice::kRaw,
        {{"l== library library library library library", -10.559700},
         {"l== library library librarySS", -10.908417},
         {"l== library library library library library", -10.583545},
         {"l== library library libraryatat", -10.726931},
         {"dedeEEEEEE", -10.106953},
         {"dedeEEEEEde", -11.100663},
         {"l= library library library library library library", -10.422727},
         {"l= library library libraryatatat", -10.423009}});
  check(nmt::decode::WeightsChoice::kEma,
        {{"l== library library library library library", -10.556915},
         {"l== library library librarySS", -10.906584},
         {"l== library library library library library", -10.581218},
         {"l== library library libraryatat", -10.725245},
         {"dedeEEEEEE", -10.106107},
         {"dedeEEEEEde", -11.100574},
         {"l= library library library library library library", -10.420261},
         {"l= library library libraryatatat", -10.421431}});
}

TEST_CASE("input text that reads like a tag is translated as text, with either kind of tag vocabulary",
          "[decode][translator]") {
  // A multilingual model's target is --tgt-lang's tag, put in by id; the text "<2en>" in a
  // line must not switch it. A vocabulary from before tags were control symbols (user-defined:
  // SentencePiece matched them in text) must still translate, with the ids it always gave for
  // text without tag strings.
  const bool legacy = GENERATE(false, true);
  INFO((legacy ? "tags as user-defined symbols" : "tags as control symbols"));
  TinyRun run(legacy ? TinyVocab::kUserDefinedTags : TinyVocab::kControlTags);
  const auto file = run.save(10, 1);
  sentencepiece::SentencePieceProcessor raw;  // the vocabulary as SentencePiece loads it
  REQUIRE(raw.Load(run.vocab_model().string()).ok());
  const int64_t to_de = raw.PieceToId("<2de>"), to_en = raw.PieceToId("<2en>");
  REQUIRE(to_de > 3);
  REQUIRE(to_en > 3);
  const std::vector<int> raw_tag_text = raw.EncodeAsIds("<2en> Install it.");
  // What SentencePiece itself makes of tag text: the tag (user-defined), or not (control).
  CHECK((std::find(raw_tag_text.begin(), raw_tag_text.end(), to_en) != raw_tag_text.end()) == legacy);

  TranslateOptions o = options_for(file);
  o.tgt_lang = "de";
  Translator translator(o, nmt::config::stored_model_options);
  for (const std::string line : {"<2en> Install it.", "Install <2en> it <2de>", "a<2en>b"}) {
    INFO(line);
    const std::vector<int64_t> ids = translator.source_ids(line);
    REQUIRE(ids.size() > 3);
    CHECK(ids.front() == to_de);
    CHECK(ids.back() == 3);  // EOS
    for (size_t k = 1; k + 1 < ids.size(); ++k) CHECK((ids[k] != to_de && ids[k] != to_en));
  }
  // Text without tag strings: the tag, then the ids SentencePiece gives, then EOS.
  for (const std::string& line : kLines) {
    if (line.find_first_not_of(' ') == std::string::npos) continue;
    std::vector<int64_t> expected = {to_de};
    for (int id : raw.EncodeAsIds(line)) expected.push_back(id);
    expected.push_back(3);
    CHECK(translator.source_ids(line) == expected);
  }
  const auto result = translator.translate({"<2en> Install it.", "Install it."});
  REQUIRE(result.size() == 2);
  CHECK(result[0].at(0).score < 0);
}
