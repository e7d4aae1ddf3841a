#include "catch_torch.h"  // first: see the header

#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/utils.h>

#include "model/transformer.h"
#include "train/loop_fixture.h"
#include "train/progress.h"
#include "train/validator.h"
#include "util/error.h"

using nmt::test::loop_data;
using nmt::test::TempDir;
using nmt::test::tiny_run_setup;
using nmt::train::SetScores;
using nmt::train::ValidationResult;
using nmt::train::Validator;

namespace {

/// The tiny model of tiny_run_setup() for `data`'s vocabulary, its weights drawn from `seed`.
nmt::model::Transformer tiny_model(const nmt::data::PreparedData& data, uint64_t seed) {
  torch::manual_seed(seed);
  const nmt::train::RunSetup setup = tiny_run_setup("unused");
  return nmt::model::Transformer(setup.model, data.vocab.src.size(), data.vocab.tgt.size(),
                                 data.vocab.src.pad_id());
}

/// Target tokens of a validation set as the loss counts them: each sentence with its EOS.
int64_t target_tokens(const nmt::data::ValidationSet& set) {
  return set.cache.tgt_tokens() + set.cache.size();
}

/// Two named validation sets, "dev" and "test", both the loop fixture's validation slice,
/// encoded with the fixture's vocabulary.
struct TwoSets {
  TempDir dir;
  nmt::data::DataOptions options = loop_data().options;
  nmt::data::PreparedData prepared;

  TwoSets() {
    options.spm_model = loop_data().prepared.vocab.src.model_path().string();
    nmt::data::CorpusOptions dev;
    dev.name = "dev";
    dev.src = options.valid_src;
    dev.tgt = options.valid_tgt;
    nmt::data::CorpusOptions test = dev;
    test.name = "test";
    options.valid = {dev, test};
    options.valid_src.clear();
    options.valid_tgt.clear();
    prepared = nmt::data::prepare_data(options, dir.path(), {2, 1});
  }
};

}  // namespace

TEST_CASE("validator: uniform predictions have loss and nll ln(V) per target token of the set",
          "[train][validator]") {
  const nmt::data::PreparedData& data = loop_data().prepared;
  nmt::model::Transformer model = tiny_model(data, 1);
  {
    // Zero weights give zero logits (tied output projection): every piece has probability
    // 1/V, so both the nll and the label-smoothed loss are ln(V) on each token.
    at::NoGradGuard no_grad;
    for (at::Tensor& p : model->parameters()) p.zero_();
  }
  TempDir run;
  Validator validator(tiny_run_setup(run.path()), data);
  const ValidationResult v = validator.validate(model);
  const double ln_v = std::log(double(data.vocab.tgt.size()));
  CHECK(v.first.name == "valid");
  REQUIRE(data.valid.size() == 1);
  CHECK(data.valid[0].cache.size() > nmt::test::kLoopValidPairs / 2);
  CHECK(v.first.tokens == target_tokens(data.valid[0]));
  CHECK(v.first.loss == Approx(ln_v).epsilon(1e-5));
  CHECK(v.first.nll == Approx(ln_v).epsilon(1e-5));
  CHECK_FALSE(v.first.bleu);  // train.valid_translate is off
  CHECK_FALSE(v.first.chrf);
  CHECK(v.others.empty());
  CHECK(v.selection == v.first.loss);  // train.best_metric loss
  CHECK(v.best);
  CHECK(v.without_improvement == 0);
  CHECK(v.seconds > 0);
  CHECK(std::string(validator.metric_name()) == "validation loss");
}

TEST_CASE(
    "validator: the same weights give the same figures, and the record keeps the best, "
    "counts validations without improvement and drives patience",
    "[train][validator]") {
  const nmt::data::PreparedData& data = loop_data().prepared;
  TempDir run;
  nmt::train::RunSetup setup = tiny_run_setup(run.path());
  setup.train.patience = 2;
  Validator validator(setup, data);
  nmt::model::Transformer model = tiny_model(data, 1);
  const ValidationResult first = validator.validate(model);
  CHECK(first.best);
  CHECK(first.first.nll > 0);
  const ValidationResult second = validator.validate(model);
  CHECK(second.first.loss == first.first.loss);  // exactly: no dropout in validation
  CHECK(second.first.nll == first.first.nll);
  CHECK_FALSE(second.best);  // equal is no improvement
  CHECK(second.without_improvement == 1);
  CHECK_FALSE(validator.patience_exhausted());
  CHECK(validator.validate(model).without_improvement == 2);
  CHECK(validator.patience_exhausted());
  REQUIRE(validator.record().best_selection);
  CHECK(*validator.record().best_selection == first.selection);

  // Other weights give other figures; a restored record is what later validations compare to.
  nmt::model::Transformer other = tiny_model(data, 2);
  validator.restore({first.selection + 100.0, 7});
  const ValidationResult better = validator.validate(other);
  CHECK(better.first.loss != first.first.loss);
  CHECK(better.best);
  CHECK(better.without_improvement == 0);
  CHECK_FALSE(validator.patience_exhausted());
  validator.restore({better.selection - 1.0, 0});
  CHECK_FALSE(validator.validate(other).best);

  // A NaN best (a first validation of a diverged model) is beaten by a number; a NaN
  // selection is never the best (NaN compared false both ways: nothing improved after it).
  validator.restore({std::nan(""), 2});
  const ValidationResult after_nan = validator.validate(other);
  CHECK(after_nan.best);
  CHECK(after_nan.without_improvement == 0);
  nmt::model::Transformer diverged = tiny_model(data, 3);
  {
    at::NoGradGuard no_grad;
    for (auto& p : diverged->parameters()) p.fill_(std::nan(""));
  }
  validator.restore({});
  const ValidationResult nan_first = validator.validate(diverged);
  CHECK(std::isnan(nan_first.selection));
  CHECK_FALSE(nan_first.best);
  CHECK(nan_first.without_improvement == 1);
  CHECK_FALSE(validator.record().best_selection);
  CHECK(validator.validate(other).best);
}

TEST_CASE(
    "validator: with train.valid_translate, BLEU and chrF are present, in range and "
    "deterministic, and best_metric ranks by them",
    "[train][validator][translate]") {
  const nmt::data::PreparedData& data = loop_data().prepared;
  nmt::model::Transformer model = tiny_model(data, 3);
  TempDir run;
  nmt::train::RunSetup setup = tiny_run_setup(run.path());
  setup.train.valid_translate = true;
  setup.train.best_metric = nmt::train::BestMetric::kBleu;
  Validator by_bleu(setup, data);
  const ValidationResult v = by_bleu.validate(model);
  REQUIRE(v.first.bleu);
  REQUIRE(v.first.chrf);
  CHECK(*v.first.bleu >= 0);
  CHECK(*v.first.bleu <= 100);
  CHECK(*v.first.chrf >= 0);
  CHECK(*v.first.chrf <= 100);
  CHECK(v.selection == -*v.first.bleu);
  CHECK(std::string(by_bleu.metric_name()) == "BLEU");

  setup.train.best_metric = nmt::train::BestMetric::kChrf;
  Validator by_chrf(setup, data);
  const ValidationResult again = by_chrf.validate(model);
  CHECK(again.first.bleu == v.first.bleu);
  CHECK(again.first.chrf == v.first.chrf);
  CHECK(again.first.loss == v.first.loss);  // translating does not change the loss
  CHECK(again.selection == -*again.first.chrf);
  CHECK(std::string(by_chrf.metric_name()) == "chrF");
}

TEST_CASE(
    "validator: every set of data.valid is scored, the first decides, and each has its "
    "metrics.jsonl record",
    "[train][validator][metrics]") {
  const TwoSets sets;
  TempDir run;
  const nmt::train::RunSetup setup = tiny_run_setup(run.path(), sets.options);
  Validator validator(setup, sets.prepared);
  nmt::model::Transformer model = tiny_model(sets.prepared, 1);
  const ValidationResult v = validator.validate(model);
  CHECK(v.first.name == "dev");
  REQUIRE(v.others.size() == 1);
  const SetScores& test = v.others[0];
  CHECK(test.name == "test");
  // The same pairs under another name: the same figures.
  CHECK(test.tokens == v.first.tokens);
  CHECK(test.loss == v.first.loss);
  CHECK(test.nll == v.first.nll);
  CHECK(v.selection == v.first.loss);

  const std::filesystem::path metrics = run.path() / "metrics.jsonl";
  nmt::train::Progress progress(setup.train, 0, metrics, 0, 0);
  progress.validation(5, 1, v);
  std::istringstream lines(nmt::test::read_file(metrics));
  std::vector<std::string> records;
  for (std::string line; std::getline(lines, line);) records.push_back(line);
  REQUIRE(records.size() == 2);
  CHECK(records[0].rfind("{\"type\": \"valid\", \"set\": \"dev\", \"step\": 5, \"epoch\": 1, ",
                         0) == 0);
  CHECK(records[0].find("\"best\": true") != std::string::npos);
  CHECK(records[0].find(fmt::format("\"tokens\": {}", v.first.tokens)) != std::string::npos);
  CHECK(records[1].rfind("{\"type\": \"valid\", \"set\": \"test\", \"step\": 5, ", 0) == 0);
  CHECK(records[1].find("\"best\"") == std::string::npos);  // the decision is the first set's
  CHECK(records[1].find("\"bleu\"") == std::string::npos);  // no translation, no scores
}

TEST_CASE("validator: on a CPU the translations of a bf16 run are fp32's, the loss is bf16's",
          "[train][validator][translate]") {
  // Greedy search's products have a row per open sentence: on a CPU bf16 kernels cost more
  // than they save there (the demo's 1,000 validation sentences: 6.4 s in bf16, 2.6 s in
  // fp32), so the search runs in fp32, as nmt-translate does by default; the loss pass
  // keeps the run's precision.
  const nmt::data::PreparedData& data = loop_data().prepared;
  nmt::model::Transformer model = tiny_model(data, 5);
  TempDir run;
  nmt::train::RunSetup setup = tiny_run_setup(run.path());
  setup.train.valid_translate = true;
  setup.precision = nmt::amp::AmpMode::kOff;
  const ValidationResult fp32 = Validator(setup, data).validate(model);
  setup.precision = nmt::amp::AmpMode::kBf16;
  const ValidationResult bf16 = Validator(setup, data).validate(model);
  REQUIRE(fp32.first.chrf);
  REQUIRE(bf16.first.chrf);
  CHECK(*fp32.first.chrf > 0);
  CHECK(bf16.first.chrf == fp32.first.chrf);
  CHECK(bf16.first.bleu == fp32.first.bleu);
  CHECK(bf16.first.loss != fp32.first.loss);  // the loss pass did run in bf16
  CHECK(bf16.first.loss == Approx(fp32.first.loss).epsilon(0.02));
}

TEST_CASE("validator: without validation data it is a configuration error", "[train][validator]") {
  TempDir run;
  nmt::data::DataOptions no_valid = loop_data().options;
  no_valid.valid_src.clear();
  no_valid.valid_tgt.clear();
  nmt::data::PreparedData empty;
  CHECK_THROWS_AS(Validator(tiny_run_setup(run.path(), no_valid), empty), nmt::ConfigError);
}

TEST_CASE("the best checkpoint follows the first set, a named set or the mean over sets",
          "[train]") {
  using nmt::train::BestMetric;
  ValidationResult v;
  v.first.name = "en-de";
  v.first.loss = 2.0;
  v.first.bleu = 20.0;
  v.first.chrf = 50.0;
  SetScores second;
  second.name = "de-en";
  second.loss = 4.0;
  second.bleu = 10.0;
  second.chrf = 40.0;
  v.others = {second};
  CHECK(nmt::train::selection_of(v, "", BestMetric::kLoss) == 2.0);
  CHECK(nmt::train::selection_of(v, "de-en", BestMetric::kLoss) == 4.0);
  CHECK(nmt::train::selection_of(v, "en-de", BestMetric::kBleu) == -20.0);
  CHECK(nmt::train::selection_of(v, "mean", BestMetric::kLoss) == 3.0);
  CHECK(nmt::train::selection_of(v, "mean", BestMetric::kBleu) == -15.0);
  CHECK(nmt::train::selection_of(v, "mean", BestMetric::kChrf) == -45.0);
  CHECK_THROWS_WITH(nmt::train::selection_of(v, "fr-de", BestMetric::kLoss),
                    "train.best_set: no validation set is named fr-de");
}
