// Source tags (data/lang_tags.h): which tags a config needs, that they are one piece of the
// trained vocabulary, that they lead every source of a tagged corpus and come from nowhere
// else (not from text that reads like a tag, with a new vocabulary or one trained with the
// tags as user-defined symbols), and the error when a given vocabulary lacks one.
#include "catch_torch.h"  // first: see the header

#include "data/lang_tags.h"
#include "data/prepare.h"
#include "data/spm_model_proto.h"
#include "data_fixture.h"
#include "spm_fixture.h"
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
  // A control symbol: inserted by id, never made from text (the text "<BT>" is its characters).
  const std::vector<int32_t> ids = vocab.encode("<BT> Hello");
  CHECK(std::find(ids.begin(), ids.end(), *bt) == ids.end());
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

TEST_CASE("a given SentencePiece model whose <BT> is an ordinary piece is refused", "[data]") {
  // An ordinary piece comes out of text too: a tag must be unreachable from it.
  nmt::test::TempDir dir;
  const auto& corpus = nmt::test::small_corpus();
  const auto legacy = nmt::test::train_user_defined_tag_vocab(corpus.options.train_src,
                                                              dir.path() / "legacy", {"<BT>"}, 400);
  const auto normal = nmt::data::retype_pieces(
      nmt::test::read_file(legacy), nmt::data::PieceType::kUserDefined,
      nmt::data::PieceType::kNormal, [](std::string_view) { return true; }, legacy.string());
  REQUIRE(normal.retyped == std::vector<std::string>{"<BT>"});
  DataOptions o = real_and_bt(dir);
  o.spm_model = dir.write("normal.model", normal.bytes).string();
  try {
    nmt::data::prepare_data(o, dir.path() / "run", {2, 1});
    FAIL("no error");
  } catch (const nmt::DataError& e) {
    CHECK_THAT(e.what(), Contains(o.spm_model + ": the SentencePiece model's piece <BT> (needed by "
                                                "data.train entry bt) is an ordinary piece"));
  }
}

TEST_CASE("tag pieces: <BT> and <2xx> of a language code", "[data]") {
  for (const char* piece : {"<BT>", "<2de>", "<2haw>"}) CHECK(nmt::data::is_tag_piece(piece));
  for (const char* piece : {"BT", "<bt>", "<2>", "<2xx>", "<2de", "2de>", "<3de>", "<2DE>", "<sep>"})
    CHECK_FALSE(nmt::data::is_tag_piece(piece));
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

namespace {

/// An en-de corpus whose sources and targets hold text that reads like the tags, written
/// into dir as name.en / name.de: the first `lines` shipped pairs, every tenth with a tag
/// string put in (first in the source, or glued to a word at its end).
CorpusOptions corpus_with_tag_text(const nmt::test::TempDir& dir, const std::string& name,
                                   int lines) {
  nmt::data::LineReader en(std::string(NMT_SOURCE_DIR) + "/data/ddtp.en-de.train.en.gz");
  nmt::data::LineReader de(std::string(NMT_SOURCE_DIR) + "/data/ddtp.en-de.train.de.gz");
  const char* kTagTexts[] = {"<BT>", "<2de>", "<2en>"};
  std::string src, tgt, s, t;
  for (int i = 0; i < lines && en.next(&s) && de.next(&t); ++i) {
    if (i % 10 == 0) {
      const std::string tag = kTagTexts[(i / 10) % 3];
      s = (i % 20 == 0 ? tag + " " + s : s + " " + tag + "x");
      t = t + " " + tag;
    }
    src += s + "\n", tgt += t + "\n";
  }
  CorpusOptions c{name, dir.write(name + ".en", src).string(), dir.write(name + ".de", tgt).string()};
  c.src_lang = "en", c.tgt_lang = "de";
  return c;
}

/// Checks that `lead` starts every source of `cache` and that no other source or target id of
/// it is one of `tags`.
void check_tags_only_first(const nmt::data::TokenCache& cache, const std::vector<int32_t>& lead,
                           const std::vector<int32_t>& tags) {
  REQUIRE(cache.size() > 100);
  const auto is_tag = [&tags](int32_t id) { return std::find(tags.begin(), tags.end(), id) != tags.end(); };
  int64_t tagged_text = 0;
  for (int64_t i = 0; i < cache.size(); ++i) {
    REQUIRE(cache.src_length(i) > int64_t(lead.size()));
    for (size_t k = 0; k < lead.size(); ++k) CHECK(cache.src_id(i, int64_t(k)) == lead[k]);
    bool clean = true;
    for (int64_t k = int64_t(lead.size()); k < cache.src_length(i); ++k) clean &= !is_tag(cache.src_id(i, k));
    for (int64_t k = 0; k < cache.tgt_length(i); ++k) clean &= !is_tag(cache.tgt_id(i, k));
    INFO("pair " << i << " (line " << cache.line_number(i) << ")");
    CHECK(clean);
    tagged_text += (cache.line_number(i) - 1) % 10 == 0;
  }
  CHECK(tagged_text > 10);  // the lines with tag text were kept, and checked
}

/// Runs prepare_data on a real (untagged) and a back-translated corpus with tag text in them,
/// with data.lang_tags: target, and checks that the tags come only first.
void check_tag_text_is_text(const DataOptions& o, const nmt::test::TempDir& dir) {
  const nmt::data::PreparedData data = nmt::data::prepare_data(o, dir.path() / "run", {2, 1});
  const nmt::data::Vocab& vocab = data.vocab.src;
  const auto de = vocab.piece_id("<2de>"), en = vocab.piece_id("<2en>"), bt = vocab.piece_id("<BT>");
  REQUIRE(de.has_value());
  REQUIRE(en.has_value());
  REQUIRE(bt.has_value());
  const std::vector<int32_t> tags = {*de, *en, *bt};
  for (const std::string text : {"<BT>", "<2de>", "<2en> Hello", "a<BT>b", "x <2de> <BT>"}) {
    INFO(text);
    const std::vector<int32_t> ids = vocab.encode(text);
    CHECK_FALSE(ids.empty());
    for (int32_t id : ids) CHECK(std::find(tags.begin(), tags.end(), id) == tags.end());
  }
  check_tags_only_first(data.train.parts()[0].cache, {*de}, tags);
  check_tags_only_first(data.train.parts()[1].cache, {*de, *bt}, tags);
}

}  // namespace

TEST_CASE("text that reads like a tag is encoded as text, never as the tag", "[data]") {
  nmt::test::TempDir dir;
  DataOptions o;
  CorpusOptions real = corpus_with_tag_text(dir, "real", 600);
  CorpusOptions bt = corpus_with_tag_text(dir, "bt", 400);
  bt.tag = CorpusTag::kBackTranslation;
  o.train = {real, bt};
  o.lang_tags = nmt::data::LangTags::kTarget;
  o.vocab_size = 400;
  o.max_len = 100;
  SECTION("with the vocabulary nmt-train trains") { check_tag_text_is_text(o, dir); }
  SECTION("with a vocabulary trained with the tags as user-defined symbols") {
    // As nmt-train trained them before: such a model (data.spm_model, or a run directory's
    // vocab/) must still load, with the same tag ids, and must not turn text into a tag.
    std::string both = nmt::test::read_file(real.src) + nmt::test::read_file(real.tgt);
    const auto legacy = nmt::test::train_user_defined_tag_vocab(
        dir.write("both.txt", both), dir.path() / "legacy", {"<2de>", "<2en>", "<BT>"}, 400);
    o.spm_model = legacy.string();
    check_tag_text_is_text(o, dir);
  }
}
