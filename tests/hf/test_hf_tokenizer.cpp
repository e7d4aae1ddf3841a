// Hugging Face tokenizer directories (hf/hf_tokenizer.h): ids through vocab.json or
// fairseq's offset, special tokens never from text, language codes found from our ISO codes and
// placed as each model expects, the serialized form, and errors that name the file and key.
// The exactness against transformers itself is tests/scripts/test_hf_tokenizer.py.
#include "catch_torch.h"  // first: see the header

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "hf/hf_tokenizer.h"
#include "data/lang_tags.h"
#include "data/language_codes.h"
#include "data/prepare.h"
#include "data/data_fixture.h"
#include "hf_tokenizer_fixture.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::data::HfTokenizerKind;
using nmt::hf::load_hf_tokenizer;
using nmt::data::Vocab;
using Json = nlohmann::ordered_json;
using nmt::test::pieces_of;
using nmt::test::train_model;

namespace {

Json added(const std::vector<std::pair<int, std::string>>& tokens) {
  Json out = Json::object();
  for (const auto& [id, content] : tokens)
    out[std::to_string(id)] = {{"content", content}, {"special", true}};
  return out;
}

/// tokenizer.json's added_tokens: the same tokens as a list, as transformers 5 writes them.
Json added_list(const Json& decoder) {
  Json out = Json::array();
  for (const auto& [id, token] : decoder.items())
    out.push_back({{"id", std::stoll(id)}, {"content", token.at("content")}, {"special", true}});
  return out;
}

/// An M2M100 directory: vocab.json holds the pieces in reverse order after fairseq's four
/// specials (so ids differ from the model's); the wmt21 language codes (en ha is ja cs ru zh
/// de) follow it, as M2M100Tokenizer numbers them.
struct M2M100Dir {
  nmt::test::TempDir dir;
  std::string model = train_model(dir, "ddtp.en-de.train.en.gz", "sentencepiece.bpe", "bpe");
  Json vocab = Json::object();
  M2M100Dir() {
    std::vector<std::string> pieces = pieces_of(model);
    std::reverse(pieces.begin(), pieces.end());
    for (const char* special : {"<s>", "<pad>", "</s>", "<unk>"}) vocab[special] = vocab.size();
    for (const std::string& piece : pieces) vocab[piece] = vocab.size();
    dir.write("vocab.json", vocab.dump());
    dir.write(
        "tokenizer_config.json",
        Json{{"tokenizer_class", "M2M100Tokenizer"},
             {"language_codes", "wmt21"},
             {"added_tokens_decoder", added({{0, "<s>"}, {1, "<pad>"}, {2, "</s>"}, {3, "<unk>"}})}}
            .dump());
  }
};

/// An NLLB directory as the hub's have it: the SentencePiece model, tokenizer_config.json and
/// tokenizer.json, both listing the special tokens and language codes.
struct NllbDir {
  nmt::test::TempDir dir;
  std::string model = train_model(dir, "ddtp.en-de.train.en.gz", "sentencepiece.bpe", "bpe");
  int size = 0;
  Json tokens;
  NllbDir() {
    sentencepiece::SentencePieceProcessor sp;
    REQUIRE(sp.LoadFromSerializedProto(model).ok());
    size = sp.GetPieceSize() + 1;
    tokens = added({{0, "<s>"},
                    {1, "<pad>"},
                    {2, "</s>"},
                    {3, "<unk>"},
                    {size, "deu_Latn"},
                    {size + 1, "zho_Hans"},
                    {size + 2, "zho_Hant"},
                    {size + 3, "<mask>"}});
    dir.write("tokenizer_config.json",
              Json{{"tokenizer_class", "NllbTokenizer"}, {"added_tokens_decoder", tokens}}.dump());
    dir.write("tokenizer.json", Json{{"added_tokens", added_list(tokens)}}.dump());
  }
};

}  // namespace

TEST_CASE(
    "an M2M100 directory's ids go through vocab.json, and special tokens never come from text",
    "[data]") {
  const M2M100Dir m2m;
  const auto tokenizer = load_hf_tokenizer(m2m.dir.path());
  const Vocab& vocab = tokenizer.vocab.src;
  CHECK(tokenizer.kind == HfTokenizerKind::kM2M100);
  CHECK(tokenizer.vocab.joint);
  CHECK(vocab.size() == static_cast<int64_t>(m2m.vocab.size()) + 8);
  CHECK(*vocab.piece_id("__en__") == static_cast<int32_t>(m2m.vocab.size()));
  CHECK(*vocab.piece_id("__de__") == static_cast<int32_t>(m2m.vocab.size()) + 7);
  CHECK((vocab.pad_id() == 1 && vocab.eos_id() == 2 && vocab.unk_id() == 3));
  CHECK(vocab.bos_id() == 0);  // <s>; the decoder starts with </s> (model.decoder_start eos)
  sentencepiece::SentencePieceProcessor sp;
  REQUIRE(sp.LoadFromSerializedProto(m2m.model).ok());
  const std::string text = "This package contains common files.";
  std::vector<std::string> pieces;
  REQUIRE(sp.Encode(text, &pieces).ok());
  std::vector<int32_t> expected;
  for (const std::string& piece : pieces) expected.push_back(m2m.vocab.at(piece).get<int32_t>());
  CHECK(vocab.encode(text) == expected);
  CHECK(vocab.decode(vocab.encode(text)) == text);
  // An unknown character is <unk>; the text of special tokens is its characters' pieces.
  const std::vector<int32_t> unknown = vocab.encode("\xF0\x9F\x98\x80");
  CHECK(std::count(unknown.begin(), unknown.end(), vocab.unk_id()) == 1);
  for (int32_t id : vocab.encode("__de__ </s> <pad> <unk>")) CHECK_FALSE(vocab.is_control(id));
  CHECK(vocab.is_control(*vocab.piece_id("__de__")));
}

TEST_CASE("an NLLB directory has fairseq's ids: the model's one up, specials 0-3", "[data]") {
  const NllbDir nllb;
  const auto tokenizer = load_hf_tokenizer(nllb.dir.path());
  const Vocab& vocab = tokenizer.vocab.src;
  CHECK(tokenizer.kind == HfTokenizerKind::kNllb);
  CHECK(vocab.size() == nllb.size + 4);
  CHECK((vocab.pad_id() == 1 && vocab.eos_id() == 2 && vocab.unk_id() == 3 && vocab.bos_id() == 0));
  sentencepiece::SentencePieceProcessor sp;
  REQUIRE(sp.LoadFromSerializedProto(nllb.model).ok());
  const std::string text = "You can specify a set of files \xF0\x9F\x98\x80 to protect.";
  std::vector<int> ids;
  REQUIRE(sp.Encode(text, &ids).ok());
  std::vector<int32_t> expected;
  for (int id : ids) expected.push_back(id == sp.unk_id() ? 3 : id + 1);
  CHECK(vocab.encode(text) == expected);
  CHECK(vocab.decode(vocab.encode("You can specify a set.")) == "You can specify a set.");
  CHECK(vocab.is_control(*vocab.piece_id("<mask>")));
  CHECK(vocab.is_control(*vocab.piece_id("deu_Latn")));
  // A model with more rows than tokens (NLLB-200: two): placeholders, special, dropped.
  const auto rows = [](int64_t n) { return nmt::hf::HfTokenizerModel{"", "", n, n}; };
  const Vocab padded = load_hf_tokenizer(nllb.dir.path(), rows(vocab.size() + 2)).vocab.src;
  CHECK(padded.size() == vocab.size() + 2);
  CHECK(padded.is_control(static_cast<int32_t>(vocab.size() + 1)));
  CHECK(padded.decode({100, static_cast<int32_t>(vocab.size())}) == vocab.decode({100}));
  CHECK_THROWS_WITH(load_hf_tokenizer(nllb.dir.path(), rows(vocab.size() - 1)),
                    Contains("more than the model's") && Contains("config.json's vocab_size"));
}

TEST_CASE("a Marian directory encodes each side with its own model, ids from one vocab.json",
          "[data]") {
  nmt::test::TempDir dir;
  const std::string source = train_model(dir, "ddtp.en-de.train.en.gz", "source", "unigram");
  const std::string target = train_model(dir, "ddtp.en-de.train.de.gz", "target", "unigram");
  std::filesystem::rename(dir.path() / "source.model", dir.path() / "source.spm");
  std::filesystem::rename(dir.path() / "target.model", dir.path() / "target.spm");
  Json vocab = {{"</s>", 0}, {"<unk>", 1}};
  for (const auto* model : {&source, &target})
    for (const std::string& piece : pieces_of(*model))
      if (!vocab.contains(piece)) vocab[piece] = vocab.size();
  for (const char* token : {">>deu<<", ">>fra<<", "<pad>"}) vocab[token] = vocab.size();
  dir.write("vocab.json", vocab.dump());
  dir.write("tokenizer_config.json", Json{{"tokenizer_class", "MarianTokenizer"}}.dump());
  const auto tokenizer = load_hf_tokenizer(dir.path());
  CHECK_FALSE(tokenizer.vocab.joint);
  const Vocab& src = tokenizer.vocab.src;
  const Vocab& tgt = tokenizer.vocab.tgt;
  CHECK(src.size() == static_cast<int64_t>(vocab.size()));
  CHECK(tgt.bos_id() == vocab.at("<pad>").get<int32_t>());  // Marian has no <s>: pad stands in
  CHECK(src.encode("Paket") != tgt.encode("Paket"));
  const std::string german = "Dieses Paket enth\xC3\xA4lt Dateien.";
  CHECK(tgt.decode(tgt.encode(german)) == german);
  // >>deu<< is the target language's tag, first in the source; never from text.
  nmt::data::DataOptions options;
  options.lang_tags = nmt::data::LangTags::kTarget;
  const nmt::data::CorpusOptions corpus{"c", "c.en", "c.de", 1.0, {}, "en", "de"};
  CHECK(nmt::data::source_tags(options, corpus, src) == std::vector<std::string>{">>deu<<"});
  CHECK(nmt::data::target_tags(options, corpus, tgt).empty());
  CHECK(nmt::data::tag_ids(src, {">>deu<<"}, "test") ==
        std::vector<int32_t>{vocab.at(">>deu<<").get<int32_t>()});
  for (int32_t id : src.encode(">>deu<< Paket")) CHECK_FALSE(src.is_control(id));
}

TEST_CASE("language codes are found from either ISO 639 code, and a miss lists the vocabulary's",
          "[data]") {
  CHECK(nmt::data::paired_language_code("de") == "deu");
  CHECK(nmt::data::paired_language_code("deu") == "de");
  CHECK(nmt::data::paired_language_code("gsw").empty());
  const M2M100Dir m2m;
  const Vocab m2m_vocab = load_hf_tokenizer(m2m.dir.path()).vocab.src;
  CHECK(nmt::data::language_tag(m2m_vocab, "de", "test") == "__de__");
  CHECK(nmt::data::language_tag(m2m_vocab, "deu", "test") == "__de__");
  CHECK_THROWS_WITH(nmt::data::language_tag(m2m_vocab, "fr", "--tgt-lang fr"),
                    Contains("no language code for fr") && Contains("--tgt-lang fr") &&
                        Contains("__en__ __ha__ __is__"));
  const NllbDir nllb;
  const Vocab nllb_vocab = load_hf_tokenizer(nllb.dir.path()).vocab.src;
  CHECK(nmt::data::language_tag(nllb_vocab, "de", "test") == "deu_Latn");
  CHECK(nmt::data::language_tag(nllb_vocab, "zho_Hant", "test") == "zho_Hant");
  CHECK_THROWS_WITH(nmt::data::language_tag(nllb_vocab, "zh", "test"),
                    Contains("several language codes for zh") && Contains("zho_Hans zho_Hant"));
  // nmt-train's own vocabularies keep <2xx>.
  CHECK(nmt::data::language_tag(nmt::test::small_corpus().prepared.vocab.src, "de", "test") ==
        "<2de>");
}

TEST_CASE("an imported vocabulary loads back from its bytes, and its fingerprint covers the ids",
          "[data]") {
  M2M100Dir m2m;
  const Vocab vocab = load_hf_tokenizer(m2m.dir.path()).vocab.src;
  const Vocab again = Vocab::from_serialized(vocab.serialized(), "stored");
  const std::string text = "Number Theory and \xF0\x9F\x98\x80 files";
  CHECK(again.encode(text) == vocab.encode(text));
  CHECK(again.fingerprint() == vocab.fingerprint());
  CHECK(again.encoding_fingerprint() == vocab.fingerprint());
  CHECK(again.size() == vocab.size());
  // The same model with two pieces' ids swapped in vocab.json: another encoding, another key.
  Json swapped = m2m.vocab;
  std::swap(*std::next(swapped.begin(), 10), *std::next(swapped.begin(), 11));
  m2m.dir.write("vocab.json", swapped.dump());
  CHECK(load_hf_tokenizer(m2m.dir.path()).vocab.src.encoding_fingerprint() !=
        vocab.encoding_fingerprint());
}

TEST_CASE("M2M100 tags: the source language's code starts the source, the target's the target",
          "[data]") {
  const M2M100Dir m2m;
  const auto saved =
      m2m.dir.write("m2m.vocab", load_hf_tokenizer(m2m.dir.path()).vocab.src.serialized());
  nmt::test::TempDir run;
  nmt::data::DataOptions options;
  options.spm_model = saved.string();
  options.lang_tags = nmt::data::LangTags::kTarget;
  options.max_len = 100;
  const auto en = nmt::test::head_of(run, "ddtp.en-de.train.en.gz", "train.en", 200);
  const auto de = nmt::test::head_of(run, "ddtp.en-de.train.de.gz", "train.de", 200);
  options.train = {{"ende", en.string(), de.string(), 1.0, {}, "en", "de"},
                   {"deen", de.string(), en.string(), 1.0, {}, "de", "en"}};
  const nmt::data::PreparedData data = nmt::data::prepare_data(options, run.path() / "run", {1, 1});
  const int32_t de_id = *data.vocab.src.piece_id("__de__");
  const int32_t en_id = *data.vocab.src.piece_id("__en__");
  const auto& ende = data.train.parts()[0].cache;
  const auto& deen = data.train.parts()[1].cache;
  REQUIRE((ende.size() > 100 && deen.size() > 100));
  for (int64_t i = 0; i < ende.size(); ++i) {
    CHECK((ende.src_id(i, 0) == en_id && ende.tgt_id(i, 0) == de_id));
    CHECK((deen.src_id(i, 0) == de_id && deen.tgt_id(i, 0) == en_id));
  }
}

TEST_CASE("a tokenizer directory with a missing or foreign file names the file and key", "[data]") {
  nmt::test::TempDir dir;
  CHECK_THROWS_WITH(load_hf_tokenizer(dir.path()),
                    Contains("tokenizer_config.json") && Contains("cannot read"));
  dir.write("tokenizer_config.json", Json{{"tokenizer_class", "BertTokenizer"}}.dump());
  CHECK_THROWS_WITH(load_hf_tokenizer(dir.path()),
                    Contains("\"tokenizer_class\" is \"BertTokenizer\""));
  dir.write("tokenizer_config.json", Json{{"tokenizer_class", "M2M100Tokenizer"}}.dump());
  CHECK_THROWS_WITH(load_hf_tokenizer(dir.path()), Contains("vocab.json"));
  M2M100Dir m2m;
  Json vocab = m2m.vocab;
  vocab.erase("</s>");
  int id = 0;
  for (auto& value : vocab) value = id++;
  m2m.dir.write("vocab.json", vocab.dump());
  m2m.dir.write("tokenizer_config.json", Json{{"tokenizer_class", "M2M100Tokenizer"}}.dump());
  CHECK_THROWS_WITH(load_hf_tokenizer(m2m.dir.path()),
                    Contains("\"eos_token\"") && Contains("</s>"));
}

TEST_CASE("an NLLB directory without tokenizer.json is refused, naming the file", "[data]") {
  // The language codes and their ids are tokenizer.json's (the docs ask for it); without it
  // the directory imported with no codes at all.
  const NllbDir nllb;
  std::filesystem::remove(nllb.dir.path() / "tokenizer.json");
  CHECK_THROWS_AS(load_hf_tokenizer(nllb.dir.path()), nmt::DataError);
  CHECK_THROWS_WITH(load_hf_tokenizer(nllb.dir.path()),
                    Contains((nllb.dir.path() / "tokenizer.json").string()) &&
                        Contains("missing") && Contains("save_pretrained"));
}

TEST_CASE("a tokenizer key of the wrong type is refused naming the file and the key", "[data]") {
  // Each case: the directory, the file edited, the key set, its value, the key path expected.
  const NllbDir nllb;
  const M2M100Dir m2m;
  const auto refused = [](const std::filesystem::path& dir, const char* file,
                          const std::string& key) {
    INFO(file << " " << key);
    CHECK_THROWS_AS(load_hf_tokenizer(dir), nmt::DataError);
    CHECK_THROWS_WITH(load_hf_tokenizer(dir),
                      Contains((dir / file).string()) && Contains("\"" + key + "\""));
  };
  const Json nllb_config =
      Json::parse(nmt::test::read_file(nllb.dir.path() / "tokenizer_config.json"));
  const Json nllb_json = Json::parse(nmt::test::read_file(nllb.dir.path() / "tokenizer.json"));
  for (const Json& value : {Json("x"), Json(1), Json::array()}) {
    Json config = nllb_config;
    config["legacy_behaviour"] = value;
    nllb.dir.write("tokenizer_config.json", config.dump());
    refused(nllb.dir.path(), "tokenizer_config.json", "legacy_behaviour");
  }
  Json config = nllb_config;
  config["added_tokens_decoder"]["0"]["special"] = "yes";
  nllb.dir.write("tokenizer_config.json", config.dump());
  // tokenizer.json's list is what NLLB reads; tokenizer_config.json's is checked all the same.
  refused(nllb.dir.path(), "tokenizer_config.json", "added_tokens_decoder.0.special");
  nllb.dir.write("tokenizer_config.json", nllb_config.dump());
  Json json = nllb_json;
  json["added_tokens"][1]["special"] = 1;
  nllb.dir.write("tokenizer.json", json.dump());
  refused(nllb.dir.path(), "tokenizer.json", "added_tokens.1.special");
  // An id past int32 was wrapped: 2^32 + n read as n, a new token at the end.
  json = nllb_json;
  json["added_tokens"][7]["id"] = (int64_t{1} << 32) + nllb.size + 3;
  nllb.dir.write("tokenizer.json", json.dump());
  refused(nllb.dir.path(), "tokenizer.json", "added_tokens.7.id");
  CHECK_THROWS_WITH(load_hf_tokenizer(nllb.dir.path()), Contains("4294967"));

  const Json m2m_config =
      Json::parse(nmt::test::read_file(m2m.dir.path() / "tokenizer_config.json"));
  config = m2m_config;
  config["language_codes"] = Json::array({"en", "de"});
  m2m.dir.write("tokenizer_config.json", config.dump());
  refused(m2m.dir.path(), "tokenizer_config.json", "language_codes");

  // Marian: separate_vocabs of another type; null is absent (transformers reads None as false).
  nmt::test::TempDir marian;
  const std::string model = train_model(marian, "ddtp.en-de.train.en.gz", "source", "unigram");
  std::filesystem::copy_file(marian.path() / "source.model", marian.path() / "source.spm");
  std::filesystem::copy_file(marian.path() / "source.model", marian.path() / "target.spm");
  Json vocab = {{"</s>", 0}, {"<unk>", 1}};
  for (const std::string& piece : pieces_of(model)) vocab[piece] = vocab.size();
  vocab["<pad>"] = vocab.size();
  marian.write("vocab.json", vocab.dump());
  for (const Json& value : {Json("no"), Json(0)}) {
    marian.write("tokenizer_config.json",
                 Json{{"tokenizer_class", "MarianTokenizer"}, {"separate_vocabs", value}}.dump());
    refused(marian.path(), "tokenizer_config.json", "separate_vocabs");
  }
  marian.write("tokenizer_config.json",
               Json{{"tokenizer_class", "MarianTokenizer"}, {"separate_vocabs", nullptr}}.dump());
  CHECK(load_hf_tokenizer(marian.path()).vocab.joint);
}
