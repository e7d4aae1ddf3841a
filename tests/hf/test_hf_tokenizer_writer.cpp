// hf/hf_tokenizer_writer: our vocabularies as Hugging Face tokenizer files. Read back through
// hf/hf_tokenizer.h they give our ids; an imported tokenizer's files come back as imported.
// That transformers' own AutoTokenizer gives our ids is tests/scripts/test_hf_export.py.
#include "catch_torch.h"  // first: see the header

#include <sentencepiece_processor.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "hf/hf_tokenizer.h"
#include "hf/hf_tokenizer_writer.h"
#include "data/vocab.h"
#include "data/data_fixture.h"
#include "spm_fixture.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::data::HfTokenizerKind;
using nmt::hf::load_hf_tokenizer;
using nmt::data::Vocab;
using nmt::data::Vocabularies;
using nmt::hf::write_hf_tokenizer;
using nmt::test::read_file;
using nmt::test::TempDir;
using Json = nlohmann::ordered_json;

namespace {

const std::vector<std::string> kLines = {
    "This package contains common files.",
    "Dieses Paket enth\xC3\xA4lt Dateien.",
    "  leading and trailing spaces  ",
    "unknown \xF0\x9F\x98\x80 characters \xE6\xBC\xA2",
    "the tag <2de> as text",
    "",
};

/// A SentencePiece model trained as nmt-train trains them: pad 0, unk 1, bos 2, eos 3, the
/// tags control symbols.
std::filesystem::path train_own_model(const TempDir& dir, const std::string& shipped,
                                      const std::string& name) {
  const auto corpus = nmt::test::head_of(dir, shipped, name + ".txt", 2000);
  return nmt::test::train_spm(corpus, dir.path() / name, 400,
                              nmt::test::kOwnSpecialIds + " --control_symbols=<2de>,<2en>");
}

/// A SentencePiece model with SentencePiece's default specials, as Hugging Face's have.
std::string train_hf_model(const TempDir& dir, const std::string& shipped, const std::string& name,
                           const std::string& type) {
  const auto corpus = nmt::test::head_of(dir, shipped, name + ".txt", 2000);
  return read_file(nmt::test::train_spm(corpus, dir.path() / name, 300, " --model_type=" + type));
}

std::vector<std::string> ordinary_pieces(const std::string& model) {
  sentencepiece::SentencePieceProcessor sp;
  REQUIRE(sp.LoadFromSerializedProto(model).ok());
  std::vector<std::string> pieces;
  for (int i = 0; i < sp.GetPieceSize(); ++i)
    if (!sp.IsUnknown(i) && !sp.IsControl(i)) pieces.push_back(sp.IdToPiece(i));
  return pieces;
}

Json read_json(const std::filesystem::path& file) { return Json::parse(read_file(file)); }

/// Each side of `a` and `b` serializes alike (ids, special tokens and models).
void check_same_vocabularies(const Vocabularies& a, const Vocabularies& b) {
  CHECK(a.src.serialized() == b.src.serialized());
  CHECK(a.tgt.serialized() == b.tgt.serialized());
}

}  // namespace

TEST_CASE("our joint vocabulary is written as a MarianTokenizer that gives our ids", "[data]") {
  TempDir dir;
  const Vocab ours = Vocab::load(train_own_model(dir, "ddtp.en-de.train.en.gz", "joint"));
  const TempDir out;
  const auto files = write_hf_tokenizer({ours, ours, true, false}, out.path(), 256);
  CHECK(files == std::vector<std::string>{"source.spm", "target.spm", "vocab.json",
                                          "tokenizer_config.json"});
  const Json config = read_json(out.path() / "tokenizer_config.json");
  CHECK(config.at("tokenizer_class") == "MarianTokenizer");
  CHECK(config.at("separate_vocabs") == false);
  CHECK(config.at("eos_token") == "</s>");
  CHECK(config.at("unk_token") == "<unk>");
  CHECK(config.at("pad_token") == "<pad>");
  CHECK(config.at("model_max_length") == 256);
  const Json vocab = read_json(out.path() / "vocab.json");
  CHECK(static_cast<int64_t>(vocab.size()) == ours.size());
  // A language tag is Marian's language token, which MarianTokenizer reads from the text.
  CHECK(vocab.at(">>de<<") == *ours.piece_id("<2de>"));
  CHECK_FALSE(vocab.contains("<2de>"));

  const auto tokenizer = load_hf_tokenizer(out.path());
  CHECK(tokenizer.kind == HfTokenizerKind::kMarian);
  const Vocab& read = tokenizer.vocab.src;
  CHECK(read.size() == ours.size());
  CHECK((read.pad_id() == 0 && read.unk_id() == 1 && read.eos_id() == 3));
  for (const std::string& line : kLines) {
    INFO(line);
    CHECK(read.encode(line) == ours.encode(line));
  }
}

TEST_CASE("our vocabularies read back from their MarianTokenizer files keep <s> as bos", "[data]") {
  // Our models start the decoder with <s> (model.decoder_start bos), which export-hf writes as
  // config.json's bos and decoder_start_token_id; import-hf checks it against the tokenizer's
  // bos, which was pad (MarianTokenizer names no bos token), so no export of ours imported.
  TempDir dir;
  const Vocab src = Vocab::load(train_own_model(dir, "ddtp.en-de.train.en.gz", "src"));
  const Vocab tgt = Vocab::load(train_own_model(dir, "ddtp.en-de.train.de.gz", "tgt"));
  REQUIRE((src.bos_id() == 2 && tgt.bos_id() == 2));
  for (const bool joint : {true, false}) {
    INFO("joint " << joint);
    const TempDir out;
    write_hf_tokenizer({src, joint ? src : tgt, joint, false}, out.path(), 128);
    const Vocabularies read = load_hf_tokenizer(out.path()).vocab;
    for (const Vocab* side : {&read.src, &read.tgt}) {
      CHECK(side->bos_id() == 2);
      CHECK(side->is_control(2));  // never from text, never generated
      CHECK((side->pad_id() == 0 && side->unk_id() == 1 && side->eos_id() == 3));
    }
    for (const std::string& line : kLines)
      CHECK(read.tgt.encode(line) == (joint ? src : tgt).encode(line));
  }
}

TEST_CASE("separate vocabularies are written with separate_vocabs and each side's ids", "[data]") {
  TempDir dir;
  const Vocab src = Vocab::load(train_own_model(dir, "ddtp.en-de.train.en.gz", "src"));
  const Vocab tgt = Vocab::load(train_own_model(dir, "ddtp.en-de.train.de.gz", "tgt"));
  const TempDir out;
  const auto files = write_hf_tokenizer({src, tgt, false, false}, out.path(), 128);
  CHECK(std::count(files.begin(), files.end(), "target_vocab.json") == 1);
  CHECK(read_json(out.path() / "tokenizer_config.json").at("separate_vocabs") == true);
  CHECK(read_file(out.path() / "target.spm") == tgt.serialized());
  const Json target_vocab = read_json(out.path() / "target_vocab.json");
  sentencepiece::SentencePieceProcessor sp;
  REQUIRE(sp.LoadFromSerializedProto(tgt.serialized()).ok());
  for (int id = 0; id < sp.GetPieceSize(); ++id) {
    const std::string piece = sp.IdToPiece(id);  // <2de> is written as Marian's >>de<<
    const bool tag = piece.size() > 3 && piece.rfind("<2", 0) == 0;
    CHECK(target_vocab.at(tag ? ">>" + piece.substr(2, piece.size() - 3) + "<<" : piece) == id);
  }
}

TEST_CASE("a model with user-defined tags is written with them as control symbols", "[data]") {
  TempDir dir;
  const auto corpus = nmt::test::head_of(dir, "ddtp.en-de.train.en.gz", "corpus.txt", 2000);
  const Vocab legacy = Vocab::load(
      nmt::test::train_user_defined_tag_vocab(corpus, dir.path() / "legacy", {"<BT>"}, 400));
  REQUIRE(legacy.retyped_tags() == std::vector<std::string>{"<BT>"});
  const TempDir out;
  write_hf_tokenizer({legacy, legacy, true, false}, out.path(), 128);
  sentencepiece::SentencePieceProcessor sp;
  REQUIRE(sp.Load((out.path() / "source.spm").string()).ok());
  CHECK(sp.IsControl(sp.PieceToId("<BT>")));
  const std::vector<int32_t> ids = legacy.encode("a <BT> line");
  CHECK(load_hf_tokenizer(out.path()).vocab.src.encode("a <BT> line") == ids);
}

TEST_CASE("an imported Marian tokenizer is written back as it was read", "[data]") {
  TempDir dir;
  const std::string source = train_hf_model(dir, "ddtp.en-de.train.en.gz", "source", "unigram");
  const std::string target = train_hf_model(dir, "ddtp.en-de.train.de.gz", "target", "unigram");
  dir.write("source.spm", source);
  dir.write("target.spm", target);
  Json vocab = {{"</s>", 0}, {"<unk>", 1}};
  for (const auto* model : {&source, &target})
    for (const std::string& piece : ordinary_pieces(*model))
      if (!vocab.contains(piece)) vocab[piece] = vocab.size();
  for (const char* token : {">>deu<<", ">>fra<<", "<pad>"}) vocab[token] = vocab.size();
  dir.write("vocab.json", vocab.dump());
  dir.write("tokenizer_config.json", Json{{"tokenizer_class", "MarianTokenizer"}}.dump());
  const auto imported = load_hf_tokenizer(dir.path());

  const TempDir out;
  write_hf_tokenizer(imported.vocab, out.path(), 512);
  CHECK(read_file(out.path() / "source.spm") == source);
  CHECK(read_file(out.path() / "target.spm") == target);
  CHECK(read_json(out.path() / "vocab.json") == vocab);
  CHECK(read_json(out.path() / "tokenizer_config.json").at("separate_vocabs") == false);
  check_same_vocabularies(load_hf_tokenizer(out.path()).vocab, imported.vocab);
}

TEST_CASE("an imported M2M100 tokenizer is written back with its language codes", "[data]") {
  TempDir dir;
  const std::string model = train_hf_model(dir, "ddtp.en-de.train.en.gz", "bpe", "bpe");
  dir.write("sentencepiece.bpe.model", model);
  Json vocab = Json::object();
  for (const char* special : {"<s>", "<pad>", "</s>", "<unk>"}) vocab[special] = vocab.size();
  std::vector<std::string> pieces = ordinary_pieces(model);
  std::reverse(pieces.begin(), pieces.end());
  for (const std::string& piece : pieces) vocab[piece] = vocab.size();
  dir.write("vocab.json", vocab.dump());
  dir.write("tokenizer_config.json",
            Json{{"tokenizer_class", "M2M100Tokenizer"}, {"language_codes", "wmt21"}}.dump());
  const auto imported = load_hf_tokenizer(dir.path());

  const TempDir out;
  write_hf_tokenizer(imported.vocab, out.path(), 1024);
  CHECK(read_file(out.path() / "sentencepiece.bpe.model") == model);
  CHECK(read_json(out.path() / "vocab.json") == vocab);
  CHECK(read_json(out.path() / "tokenizer_config.json").at("language_codes") == "wmt21");
  check_same_vocabularies(load_hf_tokenizer(out.path()).vocab, imported.vocab);
}

TEST_CASE("an imported NLLB tokenizer is written back as its model and tokenizer_config.json",
          "[data]") {
  // transformers 5 builds NllbTokenizer from the SentencePiece model and the codes listed in
  // tokenizer_config.json (tests/scripts/test_hf_import.py checks its ids on the round trip).
  TempDir dir;
  const std::string model =
      train_hf_model(dir, "ddtp.en-de.train.en.gz", "sentencepiece.bpe", "bpe");
  sentencepiece::SentencePieceProcessor sp;
  REQUIRE(sp.LoadFromSerializedProto(model).ok());
  const int size = sp.GetPieceSize() + 1;  // fairseq's 4 specials, the pieces but 3 one up
  dir.write("tokenizer_config.json", Json{{"tokenizer_class", "NllbTokenizer"}}.dump());
  Json added = Json::array();
  int id = 0;
  for (const char* token : {"<s>", "<pad>", "</s>", "<unk>"})
    added.push_back({{"id", id++}, {"content", token}, {"special", true}});
  id = size;
  for (const char* token : {"deu_Latn", "eng_Latn", "<mask>"})
    added.push_back({{"id", id++}, {"content", token}, {"special", true}});
  dir.write("tokenizer.json", Json{{"added_tokens", added}}.dump());
  const auto imported = load_hf_tokenizer(dir.path());
  const TempDir out;
  write_hf_tokenizer(imported.vocab, out.path(), 1024);
  CHECK(read_file(out.path() / "sentencepiece.bpe.model") == model);
  const Json config = read_json(out.path() / "tokenizer_config.json");
  CHECK(config.at("tokenizer_class") == "NllbTokenizer");
  CHECK(config.at("legacy_behaviour") == false);
  CHECK(config.at("extra_special_tokens") == Json::array({"deu_Latn", "eng_Latn"}));
  CHECK(config.at("mask_token") == "<mask>");
  // Read back, it needs the tokenizer.json that transformers writes from these files
  // (AutoTokenizer.from_pretrained(dir).save_pretrained(dir)): the ids of the codes are its.
  CHECK_THROWS_WITH(load_hf_tokenizer(out.path()),
                    Contains("tokenizer.json") && Contains("missing"));
}

TEST_CASE("two pieces written as one vocab.json token are refused, naming both ids", "[data]") {
  // The tag <2de> is written as >>de<<; a model with the piece >>de<< too has two ids for it.
  TempDir dir;
  const auto corpus = nmt::test::head_of(dir, "ddtp.en-de.train.en.gz", "clash.txt", 2000);
  const Vocab vocab = Vocab::load(nmt::test::train_spm(
      corpus, dir.path() / "clash", 400,
      nmt::test::kOwnSpecialIds + " --control_symbols=<2de> --user_defined_symbols=>>de<<"));
  const TempDir out;
  CHECK_THROWS_AS(write_hf_tokenizer({vocab, vocab, true, false}, out.path(), 256), nmt::DataError);
  CHECK_THROWS_WITH(write_hf_tokenizer({vocab, vocab, true, false}, out.path(), 256),
                    Contains("the token \">>de<<\" has two ids (4 and 5)"));
}
