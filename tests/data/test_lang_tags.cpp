// Source tags (data/lang_tags.h): which tags a config needs, that they are one piece of the
// trained vocabulary, that they lead every source of a tagged corpus, and the error when a
// given vocabulary lacks one.
#include "catch_torch.h"  // first: see the header

#include "data/lang_tags.h"
#include "data/prepare.h"
#include "data_fixture.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::data::CorpusOptions;
using nmt::data::CorpusTag;
using nmt::data::DataOptions;

namespace {

/// Two corpora of the shipped sample: 600 real pairs and 400 "back-translated" ones.
DataOptions real_and_bt(const nmt::test::TempDir& dir) {
  DataOptions o;
  CorpusOptions real{"real", nmt::test::head_of(dir, "ddtp.en-de.train.en.gz", "real.en", 600).string(),
                     nmt::test::head_of(dir, "ddtp.en-de.train.de.gz", "real.de", 600).string()};
  CorpusOptions bt{"bt", nmt::test::head_of(dir, "ddtp.en-de.valid.en", "bt.en", 400).string(),
                   nmt::test::head_of(dir, "ddtp.en-de.valid.de", "bt.de", 400).string()};
  bt.tag = CorpusTag::kBackTranslation;
  o.train = {real, bt};
  o.vocab_size = 400;
  o.max_len = 100;
  return o;
}

}  // namespace

TEST_CASE("only a config with a tagged corpus needs tags", "[data]") {
  DataOptions o;
  o.train = {CorpusOptions{"a", "a.en", "a.de"}, CorpusOptions{"b", "b.en", "b.de"}};
  CHECK(nmt::data::required_tags(o).empty());
  CHECK(nmt::data::source_tags(o, o.train[0]).empty());
  o.train[1].tag = CorpusTag::kBackTranslation;
  CHECK(nmt::data::required_tags(o) == std::vector<std::string>{"<BT>"});
  CHECK(nmt::data::source_tags(o, o.train[0]).empty());
  CHECK(nmt::data::source_tags(o, o.train[1]) == std::vector<std::string>{"<BT>"});
}

TEST_CASE("a back-translated corpus starts every source with <BT>, one piece of the vocabulary",
          "[data]") {
  nmt::test::TempDir dir;
  const DataOptions o = real_and_bt(dir);
  const nmt::data::PreparedData data = nmt::data::prepare_data(o, dir.path() / "run", {2, 1});
  const nmt::data::Vocab& vocab = data.vocab.src;
  const std::optional<int32_t> bt = vocab.piece_id("<BT>");
  REQUIRE(bt.has_value());
  CHECK(*bt > nmt::data::kEosId);
  // A user-defined symbol: the text "<BT>" is that one piece too, never split.
  const std::vector<int32_t> ids = vocab.encode("<BT> Hello");
  CHECK(std::find(ids.begin(), ids.end(), *bt) != ids.end());
  CHECK_FALSE(vocab.piece_id("<2xx>").has_value());
  const auto& real = data.train.parts()[0].cache;
  const auto& synthetic = data.train.parts()[1].cache;
  REQUIRE(synthetic.size() > 300);
  for (int64_t i = 0; i < synthetic.size(); ++i) {
    REQUIRE(synthetic.src_length(i) >= 2);
    CHECK(synthetic.src_id(i, 0) == *bt);
    CHECK(synthetic.src_id(i, 1) != *bt);
  }
  for (int64_t i = 0; i < real.size(); ++i) CHECK(real.src_id(i, 0) != *bt);
  // The tag counts towards data.max_len: no tagged source is longer than it.
  for (int64_t i = 0; i < synthetic.size(); ++i) CHECK(synthetic.src_length(i) <= o.max_len);
}

TEST_CASE("a given SentencePiece model without <BT> is refused naming the model and the entry",
          "[data]") {
  nmt::test::TempDir dir;
  const auto& untagged = nmt::test::small_corpus();  // a vocabulary trained without tags
  DataOptions o = real_and_bt(dir);
  o.spm_model = untagged.prepared.vocab.src.model_path().string();
  try {
    nmt::data::prepare_data(o, dir.path() / "run", {2, 1});
    FAIL("no error");
  } catch (const nmt::DataError& e) {
    CHECK_THAT(e.what(), Contains(o.spm_model + ": the SentencePiece model has no piece <BT> "
                                                "(needed by data.train entry bt)"));
  }
}

TEST_CASE("language codes: two and three letters from the ISO 639 lists, and their tags", "[data]") {
  for (const char* code : {"de", "en", "zh", "sw", "deu", "haw"}) CHECK(nmt::data::is_language_code(code));
  for (const char* code : {"", "xx", "EN", "e", "en-US", "de1", "<2de>"})
    CHECK_FALSE(nmt::data::is_language_code(code));
  CHECK(nmt::data::language_tag("de") == "<2de>");
}

TEST_CASE("with lang_tags target every language has a tag, and each source its target's first",
          "[data]") {
  DataOptions o;
  CorpusOptions en_de{"en-de", "a.en", "a.de"}, de_en{"de-en", "a.de", "a.en"}, fr_de{"fr-de", "b.fr", "b.de"};
  en_de.src_lang = "en", en_de.tgt_lang = "de";
  de_en.src_lang = "de", de_en.tgt_lang = "en";
  fr_de.src_lang = "fr", fr_de.tgt_lang = "de";
  fr_de.tag = CorpusTag::kBackTranslation;
  o.train = {en_de, de_en, fr_de};
  CHECK(nmt::data::run_languages(o) == std::vector<std::string>{"de", "en", "fr"});
  CHECK(nmt::data::pair_label(en_de) == "en-de");
  CHECK(nmt::data::pair_label(CorpusOptions{"x", "x.en", "x.de"}).empty());
  // Languages named, no tags: only <BT>.
  CHECK(nmt::data::required_tags(o) == std::vector<std::string>{"<BT>"});
  CHECK(nmt::data::source_tags(o, en_de).empty());
  o.lang_tags = nmt::data::LangTags::kTarget;
  CHECK(nmt::data::required_tags(o) == std::vector<std::string>{"<2de>", "<2en>", "<2fr>", "<BT>"});
  CHECK(nmt::data::source_tags(o, de_en) == std::vector<std::string>{"<2en>"});
  CHECK(nmt::data::source_tags(o, fr_de) == std::vector<std::string>{"<2de>", "<BT>"});
}

TEST_CASE("a two-direction corpus set: each source starts with its target's tag", "[data]") {
  nmt::test::TempDir dir;
  DataOptions o;
  const std::string en = nmt::test::head_of(dir, "ddtp.en-de.train.en.gz", "t.en", 500).string();
  const std::string de = nmt::test::head_of(dir, "ddtp.en-de.train.de.gz", "t.de", 500).string();
  CorpusOptions en_de{"en-de", en, de}, de_en{"de-en", de, en};
  en_de.src_lang = "en", en_de.tgt_lang = "de";
  de_en.src_lang = "de", de_en.tgt_lang = "en";
  o.train = {en_de, de_en};
  o.valid = {en_de};
  o.lang_tags = nmt::data::LangTags::kTarget;
  o.vocab_size = 400;
  o.max_len = 100;
  const nmt::data::PreparedData data = nmt::data::prepare_data(o, dir.path() / "run", {2, 1});
  const auto to_de = data.vocab.src.piece_id("<2de>"), to_en = data.vocab.src.piece_id("<2en>");
  REQUIRE(to_de.has_value());
  REQUIRE(to_en.has_value());
  for (int64_t i = 0; i < data.train.parts()[0].cache.size(); ++i)
    CHECK(data.train.parts()[0].cache.src_id(i, 0) == *to_de);
  for (int64_t i = 0; i < data.train.parts()[1].cache.size(); ++i)
    CHECK(data.train.parts()[1].cache.src_id(i, 0) == *to_en);
  REQUIRE(data.valid.size() == 1);
  CHECK(data.valid[0].pair == "en-de");
  CHECK(data.valid[0].cache.src_id(0, 0) == *to_de);
}
