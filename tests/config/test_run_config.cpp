#include <catch2/catch.hpp>

#include "config/run_config.h"
#include "test_support.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::ConfigError;
using nmt::config::ConfigSources;
using nmt::config::load_run_config;
using nmt::config::RunConfig;

// Tests run from the source tree (CTest WORKING_DIRECTORY), where configs/ and data/ are.

namespace {

const char* kTrainData =
    "data:\n"
    "  train_src: data/ddtp.en-de.train.en.gz\n"
    "  train_tgt: data/ddtp.en-de.train.de.gz\n";

std::string load_error(const ConfigSources& sources) {
  try {
    load_run_config(sources);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string file_error(const nmt::test::TempDir& dir, const std::string& yaml) {
  return load_error({dir.write("run.yaml", yaml)});
}

}  // namespace

TEST_CASE("the shipped configs load and validate", "[config]") {
  for (const char* name : {"configs/tiny.yaml", "configs/demo.yaml",
                           "configs/transformer-base.yaml", "configs/transformer-big.yaml"}) {
    INFO(name);
    CHECK_NOTHROW(load_run_config({name}));
  }
  RunConfig tiny = load_run_config({"configs/tiny.yaml"});
  CHECK(tiny.run_dir == "runs/tiny");
  CHECK(tiny.model.d_model == 128);
  CHECK(tiny.model.norm == nmt::model::NormPosition::kPre);
  CHECK(tiny.data.train_src == "data/ddtp.en-de.train.en.gz");
  CHECK(tiny.amp.mode == nmt::amp::AmpMode::kOff);
  RunConfig big = load_run_config({"configs/transformer-big.yaml"});
  CHECK(big.model.d_model == 1024);
  CHECK(big.amp.mode == nmt::amp::AmpMode::kBf16);
}

TEST_CASE("printed config loads back to the same config", "[config]") {
  nmt::test::TempDir dir;
  for (const char* name : {"configs/tiny.yaml", "configs/transformer-big.yaml"}) {
    INFO(name);
    RunConfig first = load_run_config({name, std::nullopt, "", {"train.lr=0.000123"}});
    const std::string printed = nmt::config::to_yaml(first);
    RunConfig second = load_run_config({dir.write("printed.yaml", printed)});
    CHECK(nmt::config::to_yaml(second) == printed);
    CHECK(nmt::config::config_hash(second) == nmt::config::config_hash(first));
    CHECK(second.train.lr == 0.000123);
  }
}

TEST_CASE("precedence: defaults < YAML < checkpoint < --set", "[config]") {
  nmt::test::TempDir dir;
  const auto file = dir.write("run.yaml", std::string(kTrainData) +
                                              "  max_tokens: 2000\n  vocab_size: 5000\n");
  ConfigSources sources{file};
  RunConfig from_file = load_run_config(sources);
  CHECK(from_file.data.max_tokens == 2000);
  CHECK(from_file.data.max_len == nmt::data::DataOptions{}.max_len);  // default kept
  CHECK(from_file.run_dir == "runs/run");  // default run_dir from the file name

  sources.checkpoint_yaml = "data:\n  max_tokens: 3000\n";
  sources.checkpoint_name = "runs/x/checkpoint-100.pt";
  RunConfig resumed = load_run_config(sources);
  CHECK(resumed.data.max_tokens == 3000);
  CHECK(resumed.data.vocab_size == 5000);  // not in the checkpoint layer: from the file

  sources.overrides = {"data.max_tokens=1000", "data.max_tokens=1500"};
  CHECK(load_run_config(sources).data.max_tokens == 1500);  // last --set wins

  sources.checkpoint_yaml = "data: [oops\n";
  CHECK_THAT(load_error(sources),
             Contains("checkpoint runs/x/checkpoint-100.pt: the stored config is not valid YAML"));
}

TEST_CASE("config file errors name the file, line and key", "[config]") {
  nmt::test::TempDir dir;
  const std::string file = (dir.path() / "run.yaml").string();
  CHECK(load_error({dir.path() / "missing.yaml"}) ==
        "config file not found: " + (dir.path() / "missing.yaml").string());
  CHECK(file_error(dir, "") == file + ": the config is empty");
  CHECK(file_error(dir, "# only a comment\n") == file + ": the config is empty");
  CHECK_THAT(file_error(dir, "model:\n  d_model: [512\n"), Contains(file + ":3:1: malformed YAML"));
  CHECK_THAT(file_error(dir, "model:\n\td_model: 512\n"), Contains(file + ":2:"));
  CHECK(file_error(dir, std::string(kTrainData) + "  max_token: 10\n") ==
        file + ":4:3: unknown key 'data.max_token'; did you mean 'data.max_tokens'?");
  CHECK(file_error(dir, std::string(kTrainData) + "amp:\n  mode: fp8\n") ==
        file + ":5:9: amp.mode: expected one of off, fp16, bf16, auto, found 'fp8' (did you mean "
              "'fp16'?)");
  CHECK(file_error(dir, std::string(kTrainData) + "train:\n  lr: -1\n") ==
        file + ":5:7: train.lr: expected a number in [0, 10], found '-1' (out of range)");
  CHECK(file_error(dir, std::string(kTrainData) + "  train_src: x\n") ==
        file + ":4:3: duplicate key 'data.train_src' (first given on line 2)");
}

TEST_CASE("cross-field and file checks name the keys involved", "[config]") {
  nmt::test::TempDir dir;
  const std::string file = (dir.path() / "run.yaml").string();
  CHECK(file_error(dir, "model:\n  heads: 8\n") ==
        file + ": data.train_src is required (a training text file), but it is not set");
  CHECK(file_error(dir, std::string(kTrainData) + "model:\n  d_model: 100\n  heads: 8\n") ==
        file + ":6:10: model.heads (8) must divide model.d_model (100)");
  CHECK(file_error(dir, std::string(kTrainData) + "  valid_src: data/ddtp.en-de.valid.en\n") ==
        file + ":4:14: data.valid_src is set but data.valid_tgt is not; give both or neither");
  CHECK_THAT(file_error(dir, std::string(kTrainData) + "  joint_vocab: false\n"),
             Contains("needs data.joint_vocab: true"));
  CHECK_THAT(file_error(dir, std::string(kTrainData) + "  max_tokens: 100\n  max_len: 200\n"),
             Contains("data.max_tokens (100) is smaller than the longest allowed sentence"));
  CHECK_THAT(file_error(dir, "data:\n  train_src: data/nope.en\n  train_tgt: data/nope.de\n"),
             Contains(file + ":2:14: data.train_src: file not found: 'data/nope.en' (relative to "
                             "the working directory"));
  CHECK(load_error({"configs/tiny.yaml", std::nullopt, "", {"data.valid_tgt=/nonexistent/x"}}) ==
        "--set data.valid_tgt=/nonexistent/x: data.valid_tgt: file not found: '/nonexistent/x'");
}

TEST_CASE("data.max_tokens takes a number or auto, and prints back what it took", "[config]") {
  nmt::test::TempDir dir;
  const std::string file = (dir.path() / "run.yaml").string();
  const RunConfig fitted =
      load_run_config({dir.write("run.yaml", std::string(kTrainData) + "  max_tokens: auto\n")});
  CHECK(!fitted.data.max_tokens.has_value());
  const std::string printed = nmt::config::to_yaml(fitted);
  CHECK_THAT(printed, Contains("max_tokens: auto"));
  CHECK(!load_run_config({dir.write("printed.yaml", printed)}).data.max_tokens.has_value());
  // A number from a later source replaces auto, as a resumed run's checkpoint does.
  CHECK(load_run_config({file, std::nullopt, "", {"data.max_tokens=3000"}}).data.max_tokens == 3000);
  CHECK(file_error(dir, std::string(kTrainData) + "  max_tokens: automatic\n") ==
        file + ":4:15: data.max_tokens: expected an integer >= 1 or auto, "
               "found 'automatic'");
  CHECK(file_error(dir, std::string(kTrainData) + "  max_tokens: 0\n") ==
        file + ":4:15: data.max_tokens: expected an integer >= 1 or auto, "
               "found '0' (out of range)");
  CHECK_THAT(file_error(dir, std::string(kTrainData) +
                                 "  max_tokens: auto\n  auto_max_tokens_limit: 100\n  max_len: 200\n"),
             Contains("data.auto_max_tokens_limit (100) is smaller than the longest allowed sentence"));
}

TEST_CASE("config hash follows what the run computes, not where it writes", "[config]") {
  RunConfig a = load_run_config({"configs/tiny.yaml"});
  RunConfig b = a;
  b.run_dir = "elsewhere";
  b.log.level = nmt::log::Level::kDebug;
  b.checkpoint.every_steps = 7;
  CHECK(nmt::config::config_hash(a) == nmt::config::config_hash(b));
  b.model.d_model = 256;
  CHECK(nmt::config::config_hash(a) != nmt::config::config_hash(b));
  CHECK(nmt::config::config_hash(a).size() == 16);
}

TEST_CASE("train.activation_checkpointing: off by default, read from --set, not hashed",
          "[config]") {
  ConfigSources sources{"configs/tiny.yaml"};
  const RunConfig off = load_run_config(sources);
  CHECK_FALSE(off.train.activation_checkpointing);
  sources.overrides = {"train.activation_checkpointing=true"};
  const RunConfig on = load_run_config(sources);
  CHECK(on.train.activation_checkpointing);
  // It changes what backward keeps, not what it computes: ranks and resumes may differ in it.
  CHECK(nmt::config::config_hash(on) == nmt::config::config_hash(off));
  sources.overrides = {"train.activation_checkpointing=sometimes"};
  CHECK_THAT(load_error(sources), Contains("train.activation_checkpointing"));
}

TEST_CASE("train.quantize: none by default, int8 read from --set, hashed", "[config]") {
  ConfigSources sources{"configs/tiny.yaml"};
  const RunConfig none = load_run_config(sources);
  CHECK(none.train.quantize == nmt::model::Quantization::kNone);
  sources.overrides = {"train.quantize=int8"};
  const RunConfig int8 = load_run_config(sources);
  CHECK(int8.train.quantize == nmt::model::Quantization::kInt8);
  // It changes what the forward computes: ranks must agree on it.
  CHECK(nmt::config::config_hash(int8) != nmt::config::config_hash(none));
  sources.overrides = {"train.quantize=int4"};
  const std::string error = load_error(sources);
  CHECK_THAT(error, Contains("train.quantize"));
  CHECK_THAT(error, Contains("int8"));
}

TEST_CASE("model_difference names the first shape key that differs, ignores dropout",
          "[config]") {
  const nmt::config::RunConfig base = load_run_config({NMT_SOURCE_DIR "/configs/tiny.yaml"});
  nmt::config::RunConfig other = base;
  CHECK_FALSE(nmt::config::model_difference(base, other));
  other.model.dropout = 0.3;
  other.train.lr = 1.0;
  CHECK_FALSE(nmt::config::model_difference(base, other));
  other.model.ffn_dim = 256;
  CHECK(nmt::config::model_difference(base, other) ==
        std::string("model.ffn_dim is 256 in the checkpoint but 512 in this run's config"));
  other = base;
  other.model.norm = nmt::model::NormPosition::kPost;
  CHECK(nmt::config::model_difference(base, other) ==
        std::string("model.norm is post in the checkpoint but pre in this run's config"));
}

TEST_CASE("a misspelled section suggests the section that holds its keys", "[config]") {
  nmt::test::TempDir dir;
  const std::string file = (dir.path() / "run.yaml").string();
  // "modle" is one edit from amp.mode's leaf, but its keys are model's.
  CHECK(file_error(dir, std::string(kTrainData) + "modle:\n  encoder_layers: 2\n") ==
        file + ":4:1: unknown section 'modle'; did you mean 'model'?");
  CHECK(file_error(dir, std::string(kTrainData) + "trian:\n  unknown_thing: 2\n") ==
        file + ":4:1: unknown section 'trian'; did you mean 'train'?");
  CHECK(file_error(dir, std::string(kTrainData) + "zzzzzz:\n  qqq: 2\n") ==
        file + ":4:1: unknown section 'zzzzzz'");
}

TEST_CASE("amp.mode false, what YAML 1.1 writers make of off, reads as off", "[config]") {
  nmt::test::TempDir dir;
  const RunConfig c =
      load_run_config({dir.write("run.yaml", std::string(kTrainData) + "amp:\n  mode: false\n")});
  CHECK(c.amp.mode == nmt::amp::AmpMode::kOff);
  CHECK_THAT(nmt::config::to_yaml(c), Contains("mode: off"));
  CHECK_THAT(file_error(dir, std::string(kTrainData) + "amp:\n  mode: true\n"),
             Contains("amp.mode: expected one of off, fp16, bf16, auto, found 'true'"));
}

TEST_CASE("amp.mode is auto in a new config, and a named or stored mode stays", "[config]") {
  nmt::test::TempDir dir;
  const RunConfig fresh = load_run_config({dir.write("run.yaml", kTrainData)});
  CHECK_FALSE(fresh.amp.mode.has_value());
  CHECK_THAT(nmt::config::to_yaml(fresh), Contains("mode: auto"));
  const RunConfig named =
      load_run_config({dir.write("named.yaml", std::string(kTrainData) + "amp:\n  mode: bf16\n")});
  CHECK(named.amp.mode == nmt::amp::AmpMode::kBf16);
  // A checkpoint's stored config (every key written) keeps its mode, auto or not.
  RunConfig stored = fresh;
  stored.amp.mode = nmt::amp::AmpMode::kOff;
  CHECK(nmt::config::parse_stored_config(nmt::config::to_yaml(stored, false), "ckpt").amp.mode ==
        nmt::amp::AmpMode::kOff);
  ConfigSources resumed{dir.write("again.yaml", kTrainData)};
  resumed.checkpoint_name = "ckpt";
  resumed.checkpoint_yaml = nmt::config::to_yaml(stored, false);
  CHECK(load_run_config(resumed).amp.mode == nmt::amp::AmpMode::kOff);
  resumed.overrides = {"amp.mode=auto"};
  CHECK_FALSE(load_run_config(resumed).amp.mode.has_value());
}

TEST_CASE("data.train takes a list of named, weighted corpora", "[config]") {
  nmt::test::TempDir dir;
  const std::string corpora =
      "data:\n"
      "  train:\n"
      "    - {name: curated, src: data/ddtp.en-de.train.en.gz, tgt: data/ddtp.en-de.train.de.gz}\n"
      "    - name: crawled\n"
      "      src: data/ddtp.en-de.valid.en\n"
      "      tgt: data/ddtp.en-de.valid.de\n"
      "      weight: 0.5\n";
  const RunConfig c = load_run_config({dir.write("run.yaml", corpora)});
  REQUIRE(c.data.train.size() == 2);
  CHECK(c.data.train[0].name == "curated");
  CHECK(c.data.train[0].weight == 1.0);
  CHECK(c.data.train[1].src == "data/ddtp.en-de.valid.en");
  CHECK(c.data.train[1].weight == 0.5);
  // The printed config is YAML that loads back to the same list.
  const std::string printed = nmt::config::to_yaml(c);
  CHECK_THAT(printed, Contains("train: [{name: curated"));
  const RunConfig again = load_run_config({dir.write("printed.yaml", printed)});
  CHECK(again.data.train == c.data.train);
  // --set takes the list in YAML flow syntax.
  ConfigSources sources{dir.write("base.yaml", "data: {}\n")};
  sources.overrides = {"data.train=[{name: a, src: data/ddtp.en-de.valid.en, tgt: "
                       "data/ddtp.en-de.valid.de, weight: 2}]"};
  const RunConfig set = load_run_config(sources);
  REQUIRE(set.data.train.size() == 1);
  CHECK(set.data.train[0].weight == 2.0);
}

TEST_CASE("data.train errors name the file, line, entry and key", "[config]") {
  nmt::test::TempDir dir;
  const std::string head = "data:\n  train:\n";
  const std::string ok = "    - {name: a, src: data/ddtp.en-de.valid.en, tgt: data/ddtp.en-de.valid.de}\n";
  CHECK_THAT(file_error(dir, head + ok +
                                 "    - {name: b, src: data/ddtp.en-de.valid.en, tgt: "
                                 "data/ddtp.en-de.valid.de, wieght: 2}\n"),
             Contains("run.yaml:4:7: data.train[1]: unknown key 'wieght'; did you mean 'weight'?"));
  CHECK_THAT(file_error(dir, head + ok + ok), Contains("data.train[1]: the name a is given twice"));
  CHECK_THAT(file_error(dir, head + "    - {name: a, src: data/ddtp.en-de.valid.en, tgt: "
                                    "data/ddtp.en-de.valid.de, weight: 0}\n"),
             Contains("weight: expected a number > 0, found '0'"));
  CHECK_THAT(file_error(dir, head + "    - {name: 'a b', src: x, tgt: y}\n"),
             Contains("name: expected a word"));
  CHECK_THAT(file_error(dir, head + "    - {name: a, src: x}\n"), Contains("corpus a needs both src and tgt"));
  CHECK_THAT(file_error(dir, head + "    - {name: a, src: missing.en, tgt: data/ddtp.en-de.valid.de}\n"),
             Contains("data.train corpus a: file not found: 'missing.en'"));
  CHECK_THAT(file_error(dir, std::string(kTrainData) + "  train:\n" + ok),
             Contains("data.train and data.train_src/train_tgt are both set"));
  CHECK_THAT(file_error(dir, "data:\n  train: data/ddtp.en-de.train.en.gz\n"),
             Contains("data.train: expected a list of corpora"));
  // data.valid: named sets, without weights, not beside valid_src.
  const std::string valid_set = "    - {name: v, src: data/ddtp.en-de.valid.en, tgt: data/ddtp.en-de.valid.de";
  CHECK_THAT(file_error(dir, std::string(kTrainData) + "  valid:\n" + valid_set + ", weight: 2}\n"),
             Contains("data.valid set v: a validation set has no weight"));
  CHECK_THAT(file_error(dir, std::string(kTrainData) + "  valid_src: data/ddtp.en-de.valid.en\n"
                             "  valid_tgt: data/ddtp.en-de.valid.de\n  valid:\n" + valid_set + "}\n"),
             Contains("data.valid and data.valid_src/valid_tgt are both set"));
  CHECK(load_run_config({dir.write("v.yaml", std::string(kTrainData) + "  valid:\n" + valid_set + "}\n")})
            .data.valid.size() == 1);
}

TEST_CASE("data.train entries take tag bt, printed only when set", "[config]") {
  nmt::test::TempDir dir;
  const std::string corpora =
      "data:\n"
      "  train:\n"
      "    - {name: real, src: data/ddtp.en-de.valid.en, tgt: data/ddtp.en-de.valid.de}\n"
      "    - {name: synthetic, src: data/ddtp.en-de.valid.en, tgt: data/ddtp.en-de.valid.de, tag: bt}\n";
  const RunConfig c = load_run_config({dir.write("run.yaml", corpora)});
  REQUIRE(c.data.train.size() == 2);
  CHECK(c.data.train[0].tag == nmt::data::CorpusTag::kNone);
  CHECK(c.data.train[1].tag == nmt::data::CorpusTag::kBackTranslation);
  const std::string printed = nmt::config::to_yaml(c);
  CHECK_THAT(printed, Contains("tag: bt"));
  CHECK_THAT(printed, Contains("weight: 1}, {name: synthetic"));  // the untagged entry: no tag
  CHECK_THAT(printed, Contains("weight: 1, tag: bt}"));
  CHECK(load_run_config({dir.write("printed.yaml", printed)}).data.train == c.data.train);
  const std::string head = "data:\n  train:\n    - {name: a, src: data/ddtp.en-de.valid.en, tgt: data/ddtp.en-de.valid.de";
  CHECK_THAT(file_error(dir, head + ", tag: mt}\n"),
             Contains("run.yaml:3:7: data.train[0]: tag: expected bt (back-translated data, tagged <BT>), found 'mt'"));
  CHECK_THAT(file_error(dir, head + ", tags: bt}\n"), Contains("unknown key 'tags'; did you mean 'tag'?"));
  CHECK_THAT(file_error(dir, std::string(kTrainData) + "  valid:\n" + head.substr(15) + ", tag: bt}\n"),
             Contains("data.valid set a: tag: a validation set has no tag"));
}

TEST_CASE("language keys: ISO codes, both or neither, required by lang_tags target", "[config]") {
  nmt::test::TempDir dir;
  const RunConfig c = load_run_config({"configs/multilingual-tiny.yaml"});
  CHECK(c.data.lang_tags == nmt::data::LangTags::kTarget);
  CHECK(c.data.sampling_temperature == 5.0);
  REQUIRE(c.data.train.size() == 2);
  CHECK(c.data.train[1].src_lang == "de");
  CHECK(c.data.train[1].tgt_lang == "en");
  CHECK(c.train.best_set == "mean");
  const std::string printed = nmt::config::to_yaml(c);
  CHECK_THAT(printed, Contains("src_lang: de, tgt_lang: en}"));
  CHECK(load_run_config({dir.write("printed.yaml", printed)}).data.train == c.data.train);

  const std::string head = "data:\n  train:\n    - {name: a, src: data/ddtp.en-de.valid.en, tgt: data/ddtp.en-de.valid.de";
  CHECK_THAT(file_error(dir, head + ", src_lang: xx, tgt_lang: de}\n"),
             Contains("run.yaml:3:7: data.train[0]: src_lang: expected an ISO 639 language code: "
                      "two letters of ISO 639-1 (e.g. de, en) or three of ISO 639-3 (e.g. deu, "
                      "gsw), optionally with an ISO 15924 script (e.g. zho_Hant), found 'xx'"));
  // Three letters are looked up, not only their form: deo is no code (a slip for deu).
  CHECK_THAT(file_error(dir, head + ", src_lang: en, tgt_lang: deo}\n"),
             Contains("run.yaml:3:7: data.train[0]: tgt_lang: expected an ISO 639 language code"));
  CHECK_NOTHROW(load_run_config({dir.write("deu.yaml", head + ", src_lang: eng, tgt_lang: deu}\n")}));
  CHECK_THAT(file_error(dir, head + ", src_lang: en}\n"),
             Contains("data.train entry a: src_lang is set but tgt_lang is not; give both or neither"));
  CHECK_THAT(file_error(dir, "data:\n  lang_tags: target\n" + head.substr(6) + "}\n"),
             Contains("data.train entry a: src_lang and tgt_lang are required with data.lang_tags: target"));
  CHECK_THAT(file_error(dir, std::string(kTrainData) + "  lang_tags: target\n"),
             Contains("run.yaml:4:14: data.lang_tags: target needs the corpora in data.train"));
  CHECK_THAT(file_error(dir, head + ", src_lang: en, tgt_lang: de}\n  valid:\n"
                                    "    - {name: v, src: data/ddtp.en-de.valid.en, tgt: "
                                    "data/ddtp.en-de.valid.de, src_lang: en, tgt_lang: fr}\n"),
             Contains("data.valid entry v: language fr is not one of data.train's (de, en)"));
  CHECK_THAT(file_error(dir, std::string(kTrainData) + "train:\n  best_set: other\n"),
             Contains("train.best_set: expected mean or the name of a data.valid set (none given), found 'other'"));
  CHECK_THAT(file_error(dir, std::string(kTrainData) + "  sampling_temperature: 0\n"),
             Contains("data.sampling_temperature"));
}

TEST_CASE("a pair of one language twice is refused, naming the file, line and entry", "[config]") {
  nmt::test::TempDir dir;
  const std::string head = "data:\n  train:\n    - {name: a, src: data/ddtp.en-de.valid.en, tgt: data/ddtp.en-de.valid.de";
  // The line and column are those of the later language key's value.
  CHECK_THAT(file_error(dir, head + ", src_lang: en, tgt_lang: en}\n"),
             Contains("run.yaml:3:103: data.train[0] (a): src_lang and tgt_lang are both 'en'; a "
                      "pair needs two different languages"));
  CHECK_THAT(file_error(dir, "data:\n  train:\n    - {name: a, src: data/ddtp.en-de.valid.en,\n"
                             "       tgt: data/ddtp.en-de.valid.de,\n       tgt_lang: deu,\n"
                             "       src_lang: deu}\n"),
             Contains("run.yaml:6:18: data.train[0] (a): src_lang and tgt_lang are both 'deu'"));
  // data.valid entries are pairs too; a --set override names itself.
  CHECK_THAT(file_error(dir, head + ", src_lang: en, tgt_lang: de}\n  valid:\n"
                                    "    - {name: v, src: data/ddtp.en-de.valid.en, tgt: "
                                    "data/ddtp.en-de.valid.de, src_lang: de, tgt_lang: de}\n"),
             Contains("run.yaml:5:103: data.valid[0] (v): src_lang and tgt_lang are both 'de'"));
  const std::string good = dir.write("good.yaml", head + ", src_lang: en, tgt_lang: de}\n");
  CHECK_THAT(load_error({good, std::nullopt, "", {"data.train=[{name: b, src: data/ddtp.en-de.valid.en, "
                                                 "tgt: data/ddtp.en-de.valid.de, src_lang: fr, tgt_lang: fr}]"}}),
             Contains("--set data.train=[{name: b"));
}

TEST_CASE("a cosine schedule without an end after warm-up is warned about, with its line",
          "[config]") {
  // train.max_steps 0 (or within warm-up) left cosine at a constant rate, silently.
  nmt::test::TempDir dir;
  std::vector<std::string> warnings;
  const std::string file = dir.write(
      "cosine.yaml", std::string(kTrainData) + "train:\n  schedule: cosine\n  max_steps: 0\n");
  load_run_config({file}, &warnings);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Contains(file + ":5:") && Contains("train.schedule cosine") &&
                              Contains("max_steps is 0") && Contains("stays constant"));
  warnings.clear();
  load_run_config({file, std::nullopt, "", {"train.max_steps=8000"}}, &warnings);
  CHECK(warnings.empty());
}

TEST_CASE("sampling_temperature with one corpus is valid but warned about once, with its line",
          "[config]") {
  nmt::test::TempDir dir;
  std::vector<std::string> warnings;
  const std::string one = dir.write("one.yaml", std::string(kTrainData) + "  sampling_temperature: 5\n");
  load_run_config({one}, &warnings);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Contains(one + ":4:25: data.sampling_temperature 5 has no effect with "
                                   "one training corpus"));
  // One data.train entry is one corpus too; a --set names itself.
  warnings.clear();
  const std::string entry = dir.write(
      "entry.yaml", "data:\n  train:\n    - {name: a, src: data/ddtp.en-de.valid.en, tgt: "
                    "data/ddtp.en-de.valid.de}\n");
  load_run_config({entry, std::nullopt, "", {"data.sampling_temperature=0.5"}}, &warnings);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Contains("--set data.sampling_temperature=0.5: data.sampling_temperature 0.5"));
  // T = 1, or several corpora: nothing to say.
  warnings.clear();
  load_run_config({dir.write("t1.yaml", std::string(kTrainData) + "  sampling_temperature: 1\n")},
                  &warnings);
  load_run_config({"configs/multilingual-tiny.yaml"}, &warnings);
  CHECK(warnings.empty());
}
