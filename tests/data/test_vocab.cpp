
#include "catch_torch.h"  // first: see the header

#include <zlib.h>

#include <fstream>
#include <iterator>

#include <sentencepiece_processor.h>

#include "data/line_sample.h"
#include "data/vocab.h"
#include "data_fixture.h"
#include "spm_fixture.h"
#include "util/error.h"
#include "util/hash.h"

using Catch::Matchers::Contains;

TEST_CASE("a trained vocabulary has the fixed special ids and round-trips text", "[data]") {
  const auto& corpus = nmt::test::small_corpus();
  const nmt::data::Vocab& vocab = corpus.prepared.vocab.src;
  CHECK(corpus.prepared.vocab.joint);
  CHECK(vocab.size() == 500);
  CHECK(vocab.pad_id() == nmt::data::kPadId);
  CHECK(vocab.unk_id() == nmt::data::kUnkId);
  CHECK(vocab.bos_id() == nmt::data::kBosId);
  CHECK(vocab.eos_id() == nmt::data::kEosId);
  const std::string text = "This package provides the library.";
  const auto ids = vocab.encode(text);
  CHECK(ids.size() > 3);
  CHECK(vocab.decode(ids) == text);
  auto with_specials = ids;
  with_specials.insert(with_specials.begin(), vocab.bos_id());
  with_specials.push_back(vocab.eos_id());
  with_specials.push_back(vocab.pad_id());
  CHECK(vocab.decode(with_specials) == text);
  CHECK(vocab.fingerprint().size() == 16);
}

TEST_CASE("an existing vocabulary in the run directory is reused, not retrained", "[data]") {
  const auto& corpus = nmt::test::small_corpus();
  const auto model = corpus.prepared.vocab.src.model_path();
  const auto written = std::filesystem::last_write_time(model);
  auto again = nmt::data::prepare_vocabularies(corpus.options, corpus.dir.path() / "run", {1, 1});
  CHECK_FALSE(again.trained);
  CHECK(again.src.fingerprint() == corpus.prepared.vocab.src.fingerprint());
  CHECK(std::filesystem::last_write_time(model) == written);
}

TEST_CASE("the same data and settings train a byte-identical vocabulary in any run directory and with any thread count",
          "[data]") {
  // The model embeds its training settings: a temporary path in them made every training's
  // file differ, and with it the token-cache key and the checkpoint's vocabulary fingerprint;
  // so did the thread count (cores, or cores per rank, which differ between launchers).
  const auto& corpus = nmt::test::small_corpus();  // trained with 2 threads
  nmt::test::TempDir other;
  const auto again = nmt::data::prepare_vocabularies(corpus.options, other.path() / "run", {1, 1});
  REQUIRE(again.trained);
  CHECK(nmt::test::read_file(again.src.model_path()) ==
        nmt::test::read_file(corpus.prepared.vocab.src.model_path()));
  CHECK(again.src.fingerprint() == corpus.prepared.vocab.src.fingerprint());
  // The human-readable piece list is written next to it, as SentencePiece would.
  const std::string pieces = nmt::test::read_file(
      std::filesystem::path(again.src.model_path()).replace_extension(".vocab"));
  CHECK(pieces.rfind("<pad>\t0\n<unk>\t0\n<s>\t0\n</s>\t0\n", 0) == 0);
}

TEST_CASE("a vocabulary trained on gzip-compressed text is the one of the plain text", "[data]") {
  // SentencePiece reads its input files as bytes: given .gz files it learned pieces of
  // compressed data (or failed for want of vocabulary), while the corpus reader decompressed.
  const auto& corpus = nmt::test::small_corpus();
  nmt::test::TempDir dir;
  nmt::data::DataOptions options = corpus.options;
  for (std::string* file : {&options.train_src, &options.train_tgt}) {
    const std::string text = nmt::test::read_file(*file);
    const auto gz = dir.path() / (std::filesystem::path(*file).filename().string() + ".gz");
    gzFile out = gzopen(gz.c_str(), "wb");
    REQUIRE(out != nullptr);
    REQUIRE(gzwrite(out, text.data(), static_cast<unsigned>(text.size())) == int(text.size()));
    REQUIRE(gzclose(out) == Z_OK);
    *file = gz.string();
  }
  const auto from_gz = nmt::data::prepare_vocabularies(options, dir.path() / "run", {1, 1});
  REQUIRE(from_gz.trained);
  // Byte-identical: the model records its training settings but not the input paths.
  CHECK(nmt::test::read_file(from_gz.src.model_path()) ==
        nmt::test::read_file(corpus.prepared.vocab.src.model_path()));
  CHECK(from_gz.src.encode("This package provides the library.") ==
        corpus.prepared.vocab.src.encode("This package provides the library."));
}

TEST_CASE("a vocabulary above data.spm_sample_lines is trained on our seeded sample of the corpus",
          "[data]") {
  // SentencePiece drew the sample itself, reading every line of the corpus to do so (and the
  // seed did not change its draw); now it gets only the lines data/line_sample.h draws. Twenty
  // source lines carry a letter no other line has: with character coverage 1.0 each drawn one
  // becomes a piece, so the vocabulary's letters say which lines it was trained on.
  nmt::test::TempDir dir;
  const std::vector<std::string> letters = {"α", "β", "γ", "δ", "ε", "ζ", "η", "θ", "ι", "κ",
                                            "λ", "μ", "ν", "ξ", "ο", "π", "ρ", "σ", "τ", "υ"};
  std::string src;
  {
    nmt::data::LineReader in(std::string(NMT_SOURCE_DIR) + "/data/ddtp.en-de.train.en.gz");
    std::string line;
    for (int i = 0; i < 1000 && in.next(&line); ++i)
      src += line + (i % 50 == 0 ? " " + letters[i / 50] : std::string()) + "\n";
  }
  nmt::data::DataOptions o;
  o.train_src = dir.write("train.en", src).string();
  o.train_tgt = nmt::test::head_of(dir, "ddtp.en-de.train.de.gz", "train.de", 1000).string();
  o.vocab_size = 500;
  o.spm_sample_lines = 1000;  // of 2000 lines: each marked line is drawn or not, alike likely
  for (uint32_t seed : {1u, 2u}) {
    const auto sample =
        nmt::data::sample_lines({o.train_src, o.train_tgt}, {o.spm_sample_lines, seed, 1, ""});
    REQUIRE(sample.lines.size() == 1000);
    std::vector<std::string> drawn, in_vocab;
    for (const std::string& letter : letters) {
      if (std::any_of(sample.lines.begin(), sample.lines.end(), [&](const std::string& line) {
            return line.find(letter) != std::string::npos;
          }))
        drawn.push_back(letter);
    }
    for (int threads : {1, 2}) {
      nmt::test::TempDir run;
      const auto v = nmt::data::prepare_vocabularies(o, run.path() / "run", {threads, seed});
      REQUIRE(v.trained);
      in_vocab.clear();
      for (const std::string& letter : letters)
        if (v.src.piece_id(letter)) in_vocab.push_back(letter);
      INFO("seed " << seed << ", " << threads << " thread(s)");
      CHECK(in_vocab == drawn);
    }
  }
}

TEST_CASE("a bad SentencePiece model is a clear error", "[data]") {
  nmt::test::TempDir dir;
  auto bogus = dir.write("bogus.model", "not a model");
  try {
    nmt::data::Vocab::load(bogus);
    FAIL("expected DataError");
  } catch (const nmt::DataError& e) {
    CHECK_THAT(e.what(), Contains(bogus.string() + ": cannot load SentencePiece model"));
  }
}

TEST_CASE("a vocabulary trained for tags holds them as control symbols", "[data]") {
  const auto& corpus = nmt::test::small_corpus();
  nmt::test::TempDir dir;
  nmt::data::DataOptions o = corpus.options;
  nmt::data::CorpusOptions tagged{"bt", o.train_src, o.train_tgt};
  tagged.tag = nmt::data::CorpusTag::kBackTranslation;
  o.train_src.clear(), o.train_tgt.clear();
  o.train = {tagged};
  const auto v = nmt::data::prepare_vocabularies(o, dir.path() / "run", {1, 1});
  const auto bt = v.src.piece_id("<BT>");
  REQUIRE(bt.has_value());
  CHECK(v.src.is_control(*bt));
  for (int32_t special : {v.src.pad_id(), v.src.bos_id(), v.src.eos_id()}) CHECK(v.src.is_control(special));
  const auto ids = v.src.encode("the <BT> library");
  REQUIRE_FALSE(ids.empty());
  CHECK_FALSE(v.src.is_control(ids[0]));
  CHECK(std::find(ids.begin(), ids.end(), *bt) == ids.end());
  // Nothing retyped on load: the token cache key is the file's, as before.
  CHECK(v.src.retyped_tags().empty());
  CHECK(v.src.encoding_fingerprint() == v.src.fingerprint());
  CHECK(corpus.prepared.vocab.src.encoding_fingerprint() == corpus.prepared.vocab.src.fingerprint());
}

TEST_CASE("a vocabulary with the tags as user-defined symbols keeps its ids and encodes text as before, except tag text",
          "[data]") {
  // nmt-train trained these before tags were control symbols; old run directories and
  // checkpoints hold them.
  const auto& corpus = nmt::test::small_corpus();
  nmt::test::TempDir dir;
  const auto model = nmt::test::train_user_defined_tag_vocab(corpus.options.train_src,
                                                             dir.path() / "legacy", {"<2de>", "<BT>"}, 500);
  sentencepiece::SentencePieceProcessor raw;  // the model as SentencePiece loads it
  REQUIRE(raw.Load(model.string()).ok());
  const int raw_bt = raw.PieceToId("<BT>");
  const std::vector<int> raw_tagged = raw.EncodeAsIds("the <BT> library");
  // The fixture is what it claims: SentencePiece turns the text into the tag.
  REQUIRE(std::find(raw_tagged.begin(), raw_tagged.end(), raw_bt) != raw_tagged.end());

  const nmt::data::Vocab vocab = nmt::data::Vocab::load(model);
  CHECK(vocab.size() == raw.GetPieceSize());
  CHECK(vocab.piece_id("<BT>") == raw_bt);
  CHECK(vocab.piece_id("<2de>") == raw.PieceToId("<2de>"));
  CHECK(vocab.is_control(raw_bt));
  CHECK(vocab.retyped_tags() == std::vector<std::string>{"<2de>", "<BT>"});
  const auto ids = vocab.encode("the <BT> library");
  CHECK(std::find(ids.begin(), ids.end(), raw_bt) == ids.end());
  CHECK(std::find(ids.begin(), ids.end(), *vocab.piece_id("<2de>")) == ids.end());
  // Text without tag strings: the ids SentencePiece gives, line for line.
  for (const std::string& file : {corpus.options.train_src, corpus.options.train_tgt}) {
    nmt::data::LineReader lines(file);
    std::string line;
    for (int i = 0; i < 500 && lines.next(&line); ++i) {
      const std::vector<int> expected = raw.EncodeAsIds(line);
      INFO(file << " line " << i + 1);
      CHECK(vocab.encode(line) == std::vector<int32_t>(expected.begin(), expected.end()));
    }
  }
  // The checkpoints' fingerprint is the file's; the token cache key follows the encoding.
  std::ifstream model_file(model, std::ios::binary);
  const std::string model_bytes((std::istreambuf_iterator<char>(model_file)),
                                std::istreambuf_iterator<char>());
  nmt::Fnv1a64 model_hash;
  model_hash.update(model_bytes);
  CHECK(vocab.fingerprint() == model_hash.hex());
  CHECK(vocab.encoding_fingerprint() != vocab.fingerprint());
}
