// End-to-end: one model for two directions (configs/multilingual-tiny.yaml: the shipped en-de
// corpus and the same files read as de-en, the target language's tag first in each source),
// trained from that config on a slice of the data: both pairs validated and reported, each
// direction translated with --tgt-lang, and a resume that continues bit for bit.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <regex>
#include <sstream>

#include "train_support.h"

using Catch::Matchers::Contains;
using nmt::test::checkpoint_path;
using nmt::test::read_file;
using nmt::test::run_command;
using nmt::test::TempDir;

namespace {

const std::string kTrain = nmt::test::kTrainBin;
const std::string kTranslate = NMT_TRANSLATE_BIN;

/// The first 2,000 shipped pairs as an en-de corpus and the first 500 as a de-en one, the
/// vocabulary trained once on them (with the tags <2de> and <2en>, by a dry run whose
/// batch_stats.json is kept), and the flags that train on them.
struct TwoDirections {
  TempDir dir;
  std::string flags;
  std::filesystem::path batch_stats;  ///< the dry run's batch_stats.json
  TwoDirections() {
    const std::string en = (dir.path() / "train.en").string(), de = (dir.path() / "train.de").string();
    const std::string small_en = (dir.path() / "small.en").string();
    const std::string small_de = (dir.path() / "small.de").string();
    REQUIRE(run_command("gzip -dc data/ddtp.en-de.train.en.gz | head -n 2000 > " + en +
                        " && gzip -dc data/ddtp.en-de.train.de.gz | head -n 2000 > " + de +
                        " && head -n 500 " + en + " > " + small_en + " && head -n 500 " + de +
                        " > " + small_de)
                .exit_code == 0);
    const std::string ven = (dir.path() / "valid.en").string(), vde = (dir.path() / "valid.de").string();
    REQUIRE(run_command("head -n 150 data/ddtp.en-de.valid.en > " + ven +
                        " && head -n 150 data/ddtp.en-de.valid.de > " + vde)
                .exit_code == 0);
    // The de-en corpus the smaller (a quarter of the pairs), so the temperature (5, the
    // config's) has sizes to reshape: it works on the sizes, the weights multiply after.
    flags = " --config configs/multilingual-tiny.yaml --set 'data.train=[{name: en-de, src: " + en +
            ", tgt: " + de + ", src_lang: en, tgt_lang: de}, {name: de-en, src: " + small_de +
            ", tgt: " + small_en + ", src_lang: de, tgt_lang: en}]' --set data.vocab_size=1000"
            " --set data.max_tokens=1024 --set train.threads=1 --set train.log_every=2"
            " --set train.valid_every=4 --set checkpoint.every_steps=4 --set checkpoint.keep_last=10"
            " --set train.valid_translate=true --set 'data.valid=[{name: valid-en-de, src: " + ven +
            ", tgt: " + vde + ", src_lang: en, tgt_lang: de}, {name: valid-de-en, src: " + vde +
            ", tgt: " + ven + ", src_lang: de, tgt_lang: en}]'";
    const std::string vocab_run = (dir.path() / "vocab-run").string();
    const auto r = run_command(kTrain + flags + " --set run_dir=" + vocab_run + " --dry-run");
    if (r.exit_code != 0) FAIL("vocabulary dry run failed: " << r.err);
    batch_stats = std::filesystem::path(vocab_run) / "batch_stats.json";
    flags += " --set data.spm_model=" + vocab_run + "/vocab/joint.model";
  }
};

const TwoDirections& two_directions() {
  static TwoDirections data;
  return data;
}

/// The numbers of a JSON text by path, a JSON pointer ("/corpora/1/drawn").
std::map<std::string, double> json_numbers(const std::string& text) {
  std::map<std::string, double> out;
  const nlohmann::json flat =
      nlohmann::json::parse(text).flatten();  // items() would dangle on a temporary
  for (const auto& [path, value] : flat.items())
    if (value.is_number()) out[path] = value.get<double>();
  return out;
}

/// The first `lines` lines of a shipped file, written into dir.
std::string head(const TempDir& dir, const std::string& shipped, int lines) {
  const std::string out = (dir.path() / std::filesystem::path(shipped).filename()).string();
  REQUIRE(run_command("head -n " + std::to_string(lines) + " " + shipped + " > " + out).exit_code == 0);
  return out;
}

}  // namespace

TEST_CASE("a multilingual run validates each pair, translates each direction, and resumes bitwise",
          "[e2e][multilingual]") {
  const TwoDirections& data = two_directions();
  TempDir straight, resumed, io;
  auto r = run_command(kTrain + data.flags + " --set run_dir=" + straight.path().string() +
                       " --set train.max_steps=8");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  // The temperature reshapes the draw (the dry run's batch_stats.json): de-en, a fifth of the
  // pairs, draws more than a fifth of the epoch (its share at temperature 1) and less than half
  // (equal shares, the limit of a large temperature), and the epoch keeps its size.
  std::map<std::string, double> draw = json_numbers(read_file(data.batch_stats));
  INFO(read_file(data.batch_stats));
  CHECK(draw["/sampling_temperature"] == 5);
  const double pairs_en_de = draw["/corpora/0/pairs"], pairs_de_en = draw["/corpora/1/pairs"];
  const double drawn_en_de = draw["/corpora/0/drawn"], drawn_de_en = draw["/corpora/1/drawn"];
  REQUIRE(pairs_de_en > 400);
  REQUIRE(pairs_en_de > 3 * pairs_de_en);
  CHECK(drawn_en_de + drawn_de_en == pairs_en_de + pairs_de_en);
  CHECK(drawn_de_en > 1.5 * pairs_de_en);
  CHECK(drawn_de_en < 0.5 * (pairs_en_de + pairs_de_en));
  // Each pair validated, BLEU and chrF per pair in metrics.jsonl.
  CHECK_THAT(r.err, Contains("| valid-en-de (en-de) | loss"));
  CHECK_THAT(r.err, Contains("| valid-de-en (de-en) | loss"));
  const std::string metrics = read_file(straight.path() / "metrics.jsonl");
  for (const std::string pair : {"en-de", "de-en"}) {
    INFO(pair);
    int records = 0;
    for (const auto& record : nmt::test::json_values(metrics)) {
      if (record.value("set", "") != "valid-" + pair) continue;
      ++records;
      CHECK(record.value("pair", "") == pair);
      CHECK((record.contains("bleu") && record.at("bleu").is_number()));
      CHECK((record.contains("chrf") && record.at("chrf").is_number()));
    }
    CHECK(records > 0);
  }
  // The checkpoint records the language list and the tags (its safetensors header's metadata).
  const std::string file = read_file(checkpoint_path(straight.path(), 8));
  const auto has = [&file](const std::string& key, const std::string& value) {
    return file.find("\"" + key + "\":\"" + value + "\"") != std::string::npos ||
           file.find("\"" + key + "\": \"" + value + "\"") != std::string::npos;
  };
  CHECK(has("languages", "de,en"));
  CHECK(has("lang_tags", "target"));

  // Stopped at 4 and resumed: the same parameters at 8, bit for bit.
  REQUIRE(run_command(kTrain + data.flags + " --set run_dir=" + resumed.path().string() +
                      " --set train.max_steps=4").exit_code == 0);
  r = run_command(kTrain + data.flags + " --set run_dir=" + resumed.path().string() +
                  " --set train.max_steps=8");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("resumed from"));
  CHECK(nmt::test::checkpoint_diff(checkpoint_path(straight.path(), 8),
                                   checkpoint_path(resumed.path(), 8), "0") == 0);

  // Each direction with --tgt-lang; the tag makes the outputs differ. Each line with its score
  // (--nbest 1), which after 8 updates differs with the tag even where the text does not;
  // the same --tgt-lang twice gives the same lines, so the difference is the tag's.
  const std::string en = head(io, "data/ddtp.en-de.test.en", 5);
  const std::string translate = kTranslate + " -c " + straight.path().string() +
                                " --device cpu --threads 1 --log-level warn --beam 2 --nbest 1 -i " + en;
  const auto to_de = run_command(translate + " --tgt-lang de");
  const auto to_en = run_command(translate + " --tgt-lang en");
  INFO(to_de.err << to_en.err);
  REQUIRE(to_de.exit_code == 0);
  REQUIRE(to_en.exit_code == 0);
  CHECK(std::count(to_de.out.begin(), to_de.out.end(), '\n') == 5);
  CHECK(std::count(to_en.out.begin(), to_en.out.end(), '\n') == 5);
  INFO("--tgt-lang de:\n" << to_de.out << "--tgt-lang en:\n" << to_en.out);
  CHECK(run_command(translate + " --tgt-lang de").out == to_de.out);
  std::istringstream de_lines(to_de.out), en_lines(to_en.out);
  int differing = 0;
  for (std::string a, b; std::getline(de_lines, a) && std::getline(en_lines, b);) differing += a != b;
  CHECK(differing == 5);
  // A corpus on 2 ranks with --tgt-lang (#47): the lines of one process decoding the same
  // shards (the same batches, so the scores agree to the last digit).
  const auto corpus_to_de = [&](const std::string& name, const std::string& ranks) {
    const std::string out = (io.path() / name).string();
    const auto r = run_command(translate + " --tgt-lang de --shard-lines 2 -o " + out +
                               " --nproc-per-node " + ranks);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    return nmt::test::read_file(out);
  };
  const std::string corpus_one = corpus_to_de("one.de", "1");
  CHECK(std::count(corpus_one.begin(), corpus_one.end(), '\n') == 5);
  CHECK(corpus_to_de("two.de", "2") == corpus_one);
  // Without --tgt-lang, or with a language the model does not know: one line listing them.
  const auto missing = run_command(translate);
  CHECK(missing.exit_code != 0);
  CHECK_THAT(missing.err, Contains("is a multilingual model: give the target language with "
                                   "--tgt-lang (one of de, en)"));
  const auto unknown = run_command(translate + " --tgt-lang fr");
  CHECK(unknown.exit_code != 0);
  CHECK_THAT(unknown.err, Contains("--tgt-lang fr: not a language of"));
  CHECK_THAT(unknown.err, Contains("(known: de, en)"));
  // --src-lang is for models whose sources start with their own language's code (imported
  // M2M100, NLLB); ours read it from the text.
  const auto source = run_command(translate + " --tgt-lang de --src-lang en");
  CHECK(source.exit_code != 0);
  CHECK_THAT(source.err, Contains("--src-lang en:") && Contains("leave --src-lang out"));
}

TEST_CASE("resuming or fine-tuning with another language list is refused naming both",
          "[e2e][multilingual]") {
  const TwoDirections& data = two_directions();
  TempDir run, other;
  REQUIRE(run_command(kTrain + data.flags + " --set run_dir=" + run.path().string() +
                      " --set train.max_steps=2 --set train.valid_every=0").exit_code == 0);
  // The same corpora, the second named de-fr: a third language (untagged, since the vocabulary
  // has no <2fr>, which would be refused first, naming the model).
  const std::string flags = std::regex_replace(data.flags, std::regex("tgt_lang: en"), "tgt_lang: fr");
  auto r = run_command(kTrain + flags + " --set data.lang_tags=none --set run_dir=" + other.path().string() +
                       " --set train.max_steps=4 --set train.valid_every=0 --init-from " +
                       run.path().string());
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Contains("trained on languages de, en, this run names de, en, fr"));
}
