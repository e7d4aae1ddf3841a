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
