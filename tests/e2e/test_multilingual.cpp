// End-to-end: one model for two directions (configs/multilingual-tiny.yaml: the shipped en-de
// corpus and the same files read as de-en, the target language's tag first in each source),
// trained from that config on a slice of the data: both pairs validated and reported, each
// direction translated with --tgt-lang, and a resume that continues bit for bit.
#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>

#include "train_support.h"

using Catch::Matchers::Contains;
using nmt::test::checkpoint_path;
using nmt::test::read_text;
using nmt::test::run_command;
using nmt::test::TempDir;

namespace {

const std::string kTrain = nmt::test::kTrainBin;
const std::string kTranslate = NMT_TRANSLATE_BIN;

/// The first 2,000 shipped pairs as en-de and de-en corpora, the vocabulary trained once on
/// them (with the tags <2de> and <2en>), and the flags that train on them.
struct TwoDirections {
  TempDir dir;
  std::string flags;
  TwoDirections() {
    const std::string en = (dir.path() / "train.en").string(), de = (dir.path() / "train.de").string();
    REQUIRE(run_command("gzip -dc data/ddtp.en-de.train.en.gz | head -n 2000 > " + en +
                        " && gzip -dc data/ddtp.en-de.train.de.gz | head -n 2000 > " + de)
                .exit_code == 0);
    const std::string ven = (dir.path() / "valid.en").string(), vde = (dir.path() / "valid.de").string();
    REQUIRE(run_command("head -n 150 data/ddtp.en-de.valid.en > " + ven +
                        " && head -n 150 data/ddtp.en-de.valid.de > " + vde)
                .exit_code == 0);
    // The de-en corpus the smaller (weight 0.5), so the temperature has shares to reshape.
    flags = " --config configs/multilingual-tiny.yaml --set 'data.train=[{name: en-de, src: " + en +
            ", tgt: " + de + ", src_lang: en, tgt_lang: de}, {name: de-en, src: " + de + ", tgt: " +
            en + ", src_lang: de, tgt_lang: en, weight: 0.5}]' --set data.vocab_size=1000"
            " --set data.max_tokens=1024 --set train.threads=1 --set train.log_every=2"
            " --set train.valid_every=4 --set checkpoint.every_steps=4 --set checkpoint.keep_last=10"
            " --set train.valid_translate=true --set 'data.valid=[{name: valid-en-de, src: " + ven +
            ", tgt: " + vde + ", src_lang: en, tgt_lang: de}, {name: valid-de-en, src: " + vde +
            ", tgt: " + ven + ", src_lang: de, tgt_lang: en}]'";
    const std::string vocab_run = (dir.path() / "vocab-run").string();
    const auto r = run_command(kTrain + flags + " --set run_dir=" + vocab_run + " --dry-run");
    if (r.exit_code != 0) FAIL("vocabulary dry run failed: " << r.err);
    flags += " --set data.spm_model=" + vocab_run + "/vocab/joint.model";
  }
};

const TwoDirections& two_directions() {
  static TwoDirections data;
  return data;
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
  // The temperature reshapes the draw: de-en (weight 0.5) gets more than half its share.
  CHECK_THAT(r.err, Contains("temperature 5"));
  // Each pair validated, BLEU and chrF per pair in metrics.jsonl.
  CHECK_THAT(r.err, Contains("| valid-en-de (en-de) | loss"));
  CHECK_THAT(r.err, Contains("| valid-de-en (de-en) | loss"));
  const std::string metrics = read_text(straight.path() / "metrics.jsonl");
  for (const std::string pair : {"en-de", "de-en"})
    CHECK(std::regex_search(metrics, std::regex("\"set\": \"valid-" + pair + "\", \"pair\": \"" +
                                                 pair + "\"[^\\n]*\"bleu\": [0-9.]+, \"chrf\": ")));
  // The checkpoint records the language list and the tags (its safetensors header's metadata).
  const std::string file = read_text(checkpoint_path(straight.path(), 8));
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

  // Each direction with --tgt-lang; the tag makes the outputs differ.
  const std::string en = head(io, "data/ddtp.en-de.test.en", 5);
  const std::string translate = kTranslate + " -c " + straight.path().string() +
                                " --device cpu --threads 1 --log-level warn -i " + en;
  const auto to_de = run_command(translate + " --tgt-lang de");
  const auto to_en = run_command(translate + " --tgt-lang en");
  INFO(to_de.err << to_en.err);
  REQUIRE(to_de.exit_code == 0);
  REQUIRE(to_en.exit_code == 0);
  CHECK(std::count(to_de.out.begin(), to_de.out.end(), '\n') == 5);
  CHECK(std::count(to_en.out.begin(), to_en.out.end(), '\n') == 5);
  // Without --tgt-lang, or with a language the model does not know: one line listing them.
  const auto missing = run_command(translate);
  CHECK(missing.exit_code != 0);
  CHECK_THAT(missing.err, Contains("is a multilingual model: give the target language with "
                                   "--tgt-lang (one of de, en)"));
  const auto unknown = run_command(translate + " --tgt-lang fr");
  CHECK(unknown.exit_code != 0);
  CHECK_THAT(unknown.err, Contains("--tgt-lang fr: not a language of"));
  CHECK_THAT(unknown.err, Contains("(known: de, en)"));
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
