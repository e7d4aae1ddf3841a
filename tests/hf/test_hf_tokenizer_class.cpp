// hf/hf_tokenizer_class: the tokenizer class of a directory chosen as AutoTokenizer chooses it
// (tokenizer_config.json, then config.json's tokenizer_class, then its model_type), Marian's
// separate vocabularies of different sizes, and tokenizer files that are not regular files.
#include "catch_torch.h"  // first: see the header

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "hf/hf_tokenizer.h"
#include "hf_tokenizer_fixture.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::data::HfTokenizerKind;
using nmt::hf::HfTokenizerModel;
using nmt::hf::load_hf_tokenizer;
using Json = nlohmann::ordered_json;

namespace {

/// A Marian directory as OPUS-MT's conversions wrote it: source.spm and target.spm, one
/// vocab.json (</s> 0, <unk> 1, the pieces, <pad> last), and a tokenizer_config.json of
/// only the languages (no tokenizer_class), as repositories converted before 2021 have it.
struct LegacyMarianDir {
  nmt::test::TempDir dir;
  std::string source = nmt::test::train_model(dir, "ddtp.en-de.train.en.gz", "source", "unigram");
  std::string target =
      nmt::test::train_model(dir, "ddtp.en-de.train.de.gz", "target", "unigram", 260);
  Json vocab = {{"</s>", 0}, {"<unk>", 1}};
  LegacyMarianDir() {
    std::filesystem::rename(dir.path() / "source.model", dir.path() / "source.spm");
    std::filesystem::rename(dir.path() / "target.model", dir.path() / "target.spm");
    for (const auto* model : {&source, &target})
      for (const std::string& piece : nmt::test::pieces_of(*model))
        if (!vocab.contains(piece)) vocab[piece] = vocab.size();
    vocab["<pad>"] = vocab.size();
    dir.write("vocab.json", vocab.dump());
    dir.write("tokenizer_config.json", Json{{"source_lang", "en"}, {"target_lang", "de"}}.dump());
  }
  /// Separate vocabularies: each side its own pieces, <pad> at id 2 in both.
  void separate() {
    const auto write = [&](const char* file, const std::string& model) {
      Json side = {{"</s>", 0}, {"<unk>", 1}, {"<pad>", 2}};
      for (const std::string& piece : nmt::test::pieces_of(model)) side[piece] = side.size();
      dir.write(file, side.dump());
      return side.size();
    };
    src_size = static_cast<int64_t>(write("vocab.json", source));
    tgt_size = static_cast<int64_t>(write("target_vocab.json", target));
    dir.write("tokenizer_config.json",
              Json{{"tokenizer_class", "MarianTokenizer"}, {"separate_vocabs", true}}.dump());
  }
  int64_t src_size = 0, tgt_size = 0;
};

HfTokenizerModel of_type(const char* type, const char* tokenizer_class = "") {
  return HfTokenizerModel{type, tokenizer_class, 0, 0};
}

}  // namespace

TEST_CASE("a Marian directory whose tokenizer_config.json names no class reads by model_type",
          "[data]") {
  // Before: refused ("tokenizer_class" is missing), where AutoTokenizer gives MarianTokenizer.
  const LegacyMarianDir marian;
  const auto tokenizer = load_hf_tokenizer(marian.dir.path(), of_type("marian"));
  CHECK(tokenizer.kind == HfTokenizerKind::kMarian);
  CHECK(tokenizer.vocab.src.size() == static_cast<int64_t>(marian.vocab.size()));
  CHECK(tokenizer.vocab.src.pad_id() == marian.vocab.at("<pad>").get<int32_t>());
  CHECK(tokenizer.vocab.tgt.eos_id() == 0);
  // config.json's tokenizer_class comes before model_type, as in AutoTokenizer.
  CHECK_THROWS_WITH(load_hf_tokenizer(marian.dir.path(), of_type("marian", "BertTokenizer")),
                    Contains("config.json: key \"tokenizer_class\" is \"BertTokenizer\""));
  // Nothing to go by: refused, naming the key.
  CHECK_THROWS_WITH(load_hf_tokenizer(marian.dir.path()),
                    Contains("tokenizer_config.json: key \"tokenizer_class\" is missing"));
  // No tokenizer_config.json at all: AutoTokenizer reads the class's defaults.
  std::filesystem::remove(marian.dir.path() / "tokenizer_config.json");
  CHECK(load_hf_tokenizer(marian.dir.path(), of_type("marian")).vocab.src.size() ==
        static_cast<int64_t>(marian.vocab.size()));
}

TEST_CASE("a class chosen by model_type is checked for the files it reads", "[data]") {
  const LegacyMarianDir marian;
  std::filesystem::remove(marian.dir.path() / "target.spm");
  CHECK_THROWS_AS(load_hf_tokenizer(marian.dir.path(), of_type("marian")), nmt::DataError);
  CHECK_THROWS_WITH(load_hf_tokenizer(marian.dir.path(), of_type("marian")),
                    Contains("target.spm: missing") && Contains("MarianTokenizer"));
  // An NLLB directory that names no class is M2M100 to AutoTokenizer, which needs vocab.json.
  nmt::test::TempDir nllb;
  nllb.write("sentencepiece.bpe.model", "x");
  nllb.write("tokenizer.json", "{}");
  nllb.write("tokenizer_config.json", "{}");
  CHECK_THROWS_WITH(
      load_hf_tokenizer(nllb.path(), of_type("m2m_100")),
      Contains("vocab.json: missing") && Contains("M2M100Tokenizer") && Contains("NllbTokenizer"));
  CHECK_THROWS_WITH(load_hf_tokenizer(nllb.path(), of_type("bart")),
                    Contains("model_type \"bart\""));
}

TEST_CASE("Marian's separate vocabularies of different sizes each get their own rows", "[data]") {
  // Before: both sides were padded to the source's size, and the import was refused.
  LegacyMarianDir marian;
  marian.separate();
  REQUIRE(marian.src_size != marian.tgt_size);
  HfTokenizerModel model{"marian", "", marian.src_size, marian.tgt_size};
  const auto tokenizer = load_hf_tokenizer(marian.dir.path(), model);
  CHECK_FALSE(tokenizer.vocab.joint);
  CHECK(tokenizer.vocab.src.size() == marian.src_size);
  CHECK(tokenizer.vocab.tgt.size() == marian.tgt_size);
  CHECK((tokenizer.vocab.src.pad_id() == 2 && tokenizer.vocab.tgt.pad_id() == 2));
  const std::string german = "Dieses Paket enth\xC3\xA4lt Dateien.";
  CHECK(tokenizer.vocab.tgt.decode(tokenizer.vocab.tgt.encode(german)) == german);
  // A model with more rows than a side's ids pads that side only.
  model.tgt_rows = marian.tgt_size + 3;
  const auto padded = load_hf_tokenizer(marian.dir.path(), model);
  CHECK(padded.vocab.src.size() == marian.src_size);
  CHECK(padded.vocab.tgt.size() == marian.tgt_size + 3);
  model.tgt_rows = marian.tgt_size - 1;
  CHECK_THROWS_WITH(load_hf_tokenizer(marian.dir.path(), model),
                    Contains("target side has") && Contains("decoder_vocab_size"));
}

TEST_CASE("tokenizer files that are not regular files are refused, not waited on", "[data]") {
  // An ifstream on a FIFO waits for a writer: the import hung.
  const LegacyMarianDir marian;
  std::filesystem::remove(marian.dir.path() / "vocab.json");
  REQUIRE(::mkfifo((marian.dir.path() / "vocab.json").c_str(), 0600) == 0);
  CHECK_THROWS_AS(load_hf_tokenizer(marian.dir.path(), of_type("marian")), nmt::DataError);
  CHECK_THROWS_WITH(load_hf_tokenizer(marian.dir.path(), of_type("marian")),
                    Contains("vocab.json: not a regular file (a FIFO)"));
  std::filesystem::remove(marian.dir.path() / "tokenizer_config.json");
  std::filesystem::create_directory(marian.dir.path() / "tokenizer_config.json");
  CHECK_THROWS_WITH(load_hf_tokenizer(marian.dir.path(), of_type("marian")),
                    Contains("tokenizer_config.json: not a regular file (a directory)"));
}
