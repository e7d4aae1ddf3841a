// data/spm_training_log: SentencePiece's log lines (as 0.1.97 writes them) become progress.
#include "catch_torch.h"  // first: see the header

#include <iostream>

#include "data/spm_training_log.h"
#include "data/vocab.h"
#include "data_fixture.h"
#include "util/log.h"

using Catch::Matchers::Contains;
using nmt::data::parse_spm_log_line;

namespace {

void feed(nmt::data::SpmTrainingProgress& progress, const char* line) {
  const auto parsed = parse_spm_log_line(line);
  REQUIRE(parsed);
  progress.on_line(*parsed);
}

}  // namespace

TEST_CASE("SentencePiece log lines are told from other text", "[data]") {
  const auto em = parse_spm_log_line(
      "unigram_model_trainer.cc(507) LOG(INFO) EM sub_iter=0 size=20962 obj=12.112");
  REQUIRE(em);
  CHECK(em->severity == "INFO");
  CHECK(em->message == "EM sub_iter=0 size=20962 obj=12.112");
  const auto warning = parse_spm_log_line("trainer_interface.cc(12) LOG(WARNING) Too many");
  REQUIRE(warning);
  CHECK(warning->severity == "WARNING");
  CHECK_FALSE(parse_spm_log_line("  vocab_size: 500"));
  CHECK_FALSE(parse_spm_log_line("trainer_spec {"));
  CHECK_FALSE(parse_spm_log_line(""));
}

TEST_CASE("unigram EM rounds are counted from the first size down to 1.1 x the vocabulary",
          "[data]") {
  // Measured with spm_train 0.1.97, vocab_size 2000: sizes 20962, 14030, ..., 2495, 2200.
  CHECK(nmt::data::unigram_em_rounds(20962, 2200) == 9);
  CHECK(nmt::data::unigram_em_rounds(2000, 2200) == 1);
  CHECK(nmt::data::unigram_em_rounds(2933, 2200) == 2);  // 2933 x 0.75 = 2199.75
}

TEST_CASE("a unigram training's rounds and a BPE training's pieces are followed", "[data]") {
  nmt::data::SpmTrainingProgress unigram(2000);
  feed(unigram, "unigram_model_trainer.cc(201) LOG(INFO) Initialized 52158 seed sentencepieces");
  CHECK(unigram.total() == 0);
  feed(unigram, "unigram_model_trainer.cc(507) LOG(INFO) EM sub_iter=0 size=20962 obj=12.1");
  CHECK(unigram.total() == 9);
  CHECK(unigram.done() == 0);
  feed(unigram, "unigram_model_trainer.cc(507) LOG(INFO) EM sub_iter=1 size=18710 obj=9.7");
  CHECK(unigram.done() == 0);
  feed(unigram, "unigram_model_trainer.cc(507) LOG(INFO) EM sub_iter=0 size=14030 obj=9.75");
  CHECK(unigram.done() == 1);

  nmt::data::SpmTrainingProgress bpe(2000);
  feed(bpe, "bpe_model_trainer.cc(258) LOG(INFO) Added: freq=9392 size=20 all=3552 piece=ed");
  feed(bpe, "bpe_model_trainer.cc(167) LOG(INFO) Updating active symbols. max_freq=2308");
  feed(bpe, "bpe_model_trainer.cc(258) LOG(INFO) Added: freq=6543 size=40 all=4559 piece=al");
  CHECK(bpe.total() == 2000);
  CHECK(bpe.done() == 40);
}

TEST_CASE("while it trains, SentencePiece's std::cerr becomes phase lines in our log", "[data]") {
  nmt::test::TempDir dir;
  const auto file = dir.path() / "log.txt";
  nmt::log::init(nmt::log::LogOptions{});
  nmt::log::add_file_sink(file);
  std::streambuf* before = std::cerr.rdbuf();
  {
    nmt::data::SpmTrainingLog captured(500);
    std::cerr << "unigram_model_trainer.cc(146) LOG(INFO) Making suffix array...\n"
              << "trainer_spec {\n  vocab_size: 500\n}\n";
    CHECK(std::cerr.rdbuf() != before);
  }
  CHECK(std::cerr.rdbuf() == before);
  // A real training through prepare_vocabularies: its phases arrive the same way.
  const auto& corpus = nmt::test::small_corpus();
  nmt::test::TempDir other;
  REQUIRE(nmt::data::prepare_vocabularies(corpus.options, other.path() / "run", {1, 1}).trained);
  nmt::log::shutdown();
  nmt::log::init(nmt::log::LogOptions{});
  const std::string log = nmt::test::read_file(file);
  CHECK_THAT(log, Contains("vocabulary: Making suffix array..."));
  CHECK_THAT(log, Contains("vocabulary: Initialized"));  // from the real training
  CHECK_THAT(log, !Contains("vocab_size: 500"));
}
