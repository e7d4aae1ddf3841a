// decode/ensemble.h: an ensemble's step is the weighted mean of its models' log-probabilities,
// so a hypothesis' score is the weighted mean of the models' teacher-forced scores of it; a
// model with itself decodes as the model alone; and the Translator loads an ensemble of
// checkpoints of other shapes but one vocabulary, refusing another vocabulary by name.
#include "catch_torch.h"  // first: see the header

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "config/stored_config.h"
#include "decode/decode_fixture.h"
#include "decode/ensemble.h"
#include "decode/search.h"
#include "decode/tiny_run.h"
#include "decode/translator.h"
#include "model/transformer.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using Catch::Matchers::WithinRel;
using nmt::decode::Ensemble;
using nmt::decode::Hypothesis;
using nmt::decode::PairScore;
using nmt::decode::SearchIds;
using nmt::decode::SearchOptions;
using nmt::decode::TranslateOptions;
using nmt::decode::Translation;
using nmt::decode::Translator;
using nmt::model::Transformer;
using nmt::test::batch_of;
using nmt::test::kBos;
using nmt::test::kEos;
using nmt::test::kPad;
using nmt::test::kVocab;
using nmt::test::random_sentences;
using nmt::test::tiny_model;
using nmt::test::TinyRun;
namespace fs = std::filesystem;

namespace {

const SearchIds kIds{kBos, kBos, kEos, kPad};
using Sentences = std::vector<std::vector<int64_t>>;
using Hypotheses = std::vector<std::vector<Hypothesis>>;

/// Sum of one model's teacher-forced log-probabilities of tokens + EOS given the source alone.
double forced_score(Transformer& model, const std::vector<int64_t>& source,
                    const std::vector<int32_t>& tokens) {
  c10::InferenceMode guard;
  std::vector<int64_t> input{kBos};
  input.insert(input.end(), tokens.begin(), tokens.end());
  std::vector<int64_t> target(tokens.begin(), tokens.end());
  target.push_back(kEos);
  const at::Tensor logits = model->forward(batch_of({source}), batch_of({input}));
  const at::Tensor lprobs = logits[0].log_softmax(-1);
  double sum = 0;
  for (size_t t = 0; t < target.size(); ++t) sum += lprobs[t][target[t]].item<double>();
  return sum;
}

/// Tokens and scores equal to the last bit.
void require_identical(const Hypotheses& a, const Hypotheses& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].size() == b[i].size());
    for (size_t k = 0; k < a[i].size(); ++k) {
      INFO("sentence " << i << " hypothesis " << k);
      CHECK(a[i][k].tokens == b[i][k].tokens);
      CHECK(a[i][k].score == b[i][k].score);
      CHECK(a[i][k].normalized_score == b[i][k].normalized_score);
    }
  }
}

std::vector<std::vector<int32_t>> tokens_of(const Hypotheses& hyps) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& h : hyps) out.push_back(h.at(0).tokens);
  return out;
}

SearchOptions search_options(int64_t beam, int64_t nbest) {
  SearchOptions o;
  o.beam = beam;
  o.nbest = nbest;
  o.max_len_a = 0;
  o.max_len_b = 12;
  return o;
}

TranslateOptions options_for(const std::vector<fs::path>& checkpoints, int64_t beam = 1) {
  TranslateOptions o;
  for (const fs::path& c : checkpoints) o.checkpoints.push_back(c.string());
  o.device = nmt::decode::DeviceChoice::kCpu;
  o.search.beam = beam;
  o.search.max_len_b = 5;
  return o;
}

const std::vector<std::string> kLines = {"This package contains the documentation.", "",
                                         "A library for reading files.", "Install it.",
                                         "The command-line tool and the shared library"};
const std::vector<std::string> kTargets = {"Dieses Paket enthält die Dokumentation.", "",
                                           "Eine Bibliothek zum Lesen von Dateien.",
                                           "Installieren Sie es.", "Das Werkzeug"};

}  // namespace

TEST_CASE("ensemble: a model with itself searches as the model alone", "[decode][ensemble]") {
  Transformer model = tiny_model(1);
  const at::Tensor src = batch_of(random_sentences(8, 21));
  const Ensemble twice({model.ptr().get(), model.ptr().get()});
  CHECK(twice.weights() == std::vector<double>{0.5, 0.5});
  SearchOptions sampled = search_options(1, 1);
  sampled.sampling = nmt::decode::SamplingOptions{};
  sampled.sampling->top_k = 5;
  sampled.sampling->seed = 3;
  SearchOptions uncached = search_options(4, 2);
  uncached.cached = false;
  for (const SearchOptions& o : {search_options(1, 1), search_options(4, 3), sampled, uncached}) {
    INFO("beam " << o.beam << " nbest " << o.nbest << (o.sampling ? " sampling" : "")
                 << (o.cached ? "" : " uncached"));
    require_identical(nmt::decode::search(*model, src, kIds, o),
                      nmt::decode::search(twice, src, kIds, o));
  }
}

TEST_CASE("ensemble: a hypothesis scores the weighted mean of its models' scores",
          "[decode][ensemble]") {
  // Models of other shapes (2 post-norm layers, 1 pre-norm layer) over one vocabulary.
  Transformer a = tiny_model(1);
  nmt::test::TinyModelOptions shape;
  shape.layers = 1;
  shape.pre_norm = true;
  Transformer b = tiny_model(2, shape);
  const Sentences sentences = random_sentences(8, 22);
  const at::Tensor src = batch_of(sentences);
  const Ensemble both({a.ptr().get(), b.ptr().get()}, {3, 1});
  REQUIRE(both.weights() == std::vector<double>{0.75, 0.25});
  for (const SearchOptions& o : {search_options(1, 1), search_options(4, 3)}) {
    INFO("beam " << o.beam);
    const Hypotheses found = nmt::decode::search(both, src, kIds, o);
    REQUIRE(found.size() == sentences.size());
    for (size_t i = 0; i < found.size(); ++i) {
      REQUIRE(found[i].size() == size_t(o.nbest));
      for (const Hypothesis& h : found[i]) {
        INFO("sentence " << i);
        // float32 steps in a padded batch against each model on the pair alone.
        const double mean = 0.75 * forced_score(a, sentences[i], h.tokens) +
                            0.25 * forced_score(b, sentences[i], h.tokens);
        CHECK_THAT(h.score, WithinRel(mean, 1e-5));
      }
    }
  }
  // The ensemble's outputs are neither model's.
  const SearchOptions greedy = search_options(1, 1);
  const auto together = tokens_of(nmt::decode::search(both, src, kIds, greedy));
  CHECK(together != tokens_of(nmt::decode::search(*a, src, kIds, greedy)));
  CHECK(together != tokens_of(nmt::decode::search(*b, src, kIds, greedy)));
}

TEST_CASE("ensemble: weights and vocabularies are checked", "[decode][ensemble]") {
  Transformer a = tiny_model(1);
  nmt::model::ModelOptions o = a->options();
  Transformer wider(o, kVocab + 1, kVocab + 1, kPad);
  CHECK_THROWS_WITH(Ensemble({a.ptr().get(), wider.ptr().get()}),
                    Contains("model 1 has 41 target tokens but model 0 has 40"));
  CHECK_THROWS_WITH(Ensemble({a.ptr().get(), a.ptr().get()}, {1}),
                    Contains("expected one per model (2), found 1"));
  CHECK_THROWS_WITH(Ensemble({a.ptr().get(), a.ptr().get()}, {1, 0}),
                    Contains("expected finite numbers > 0, found 0"));
  CHECK_THROWS_AS(Ensemble({}), nmt::ConfigError);
}

TEST_CASE("an ensemble of a checkpoint with itself translates and scores as it alone",
          "[decode][translator][ensemble]") {
  TinyRun run;
  const fs::path file = run.save(10, 1);
  for (const int64_t beam : {int64_t{1}, int64_t{4}}) {
    INFO("beam " << beam);
    TranslateOptions alone_options = options_for({file}, beam);
    alone_options.search.nbest = beam == 1 ? 1 : 3;
    TranslateOptions pair_options = alone_options;
    pair_options.checkpoints = {file.string(), file.string()};
    Translator alone(alone_options, nmt::config::stored_model_options);
    Translator pair(pair_options, nmt::config::stored_model_options);
    REQUIRE(pair.models().size() == 2);
    CHECK(pair.models()[1].files == std::vector<fs::path>{file});
    CHECK(pair.models()[1].weight == 0.5);
    const auto a = alone.translate(kLines), b = pair.translate(kLines);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i)
      for (size_t k = 0; k < a[i].size(); ++k) {
        INFO("line " << i << " hypothesis " << k);
        CHECK(b[i].at(k).tokens == a[i][k].tokens);
        CHECK(b[i][k].score == a[i][k].score);
        CHECK(b[i][k].normalized_score == a[i][k].normalized_score);
      }
    const auto sa = alone.score(kLines, kTargets, 0, nullptr, {});
    const auto sb = pair.score(kLines, kTargets, 0, nullptr, {});
    for (size_t i = 0; i < sa.size(); ++i) {
      CHECK(sb[i].log_prob == sa[i].log_prob);
      CHECK(sb[i].tokens == sa[i].tokens);
    }
  }
}

TEST_CASE("an ensemble of checkpoints of other shapes scores the weighted mean of theirs",
          "[decode][translator][ensemble]") {
  TinyRun run;
  const fs::path small = run.save(10, 1);
  run.model_options().encoder_layers = 2;
  run.model_options().decoder_layers = 2;
  run.model_options().d_model = 48;
  run.model_options().ffn_dim = 96;
  const fs::path large = run.save(20, 2);
  TranslateOptions both_options = options_for({small, large});
  both_options.ensemble_weights = {3, 1};
  Translator a(options_for({small}), nmt::config::stored_model_options);
  Translator b(options_for({large}), nmt::config::stored_model_options);
  Translator both(both_options, nmt::config::stored_model_options);
  CHECK(both.models()[0].weight == 0.75);
  CHECK(both.models()[1].weight == 0.25);
  CHECK(both.models()[1].files == std::vector<fs::path>{large});
  // Each model scores the pairs in the same batches as alone: the mean to double rounding.
  const auto sa = a.score(kLines, kTargets, 0, nullptr, {});
  const auto sb = b.score(kLines, kTargets, 0, nullptr, {});
  const auto s = both.score(kLines, kTargets, 0, nullptr, {});
  REQUIRE(s.size() == kLines.size());
  for (size_t i = 0; i < s.size(); ++i) {
    INFO("pair " << i);
    CHECK(s[i].tokens == sa[i].tokens);
    CHECK_THAT(s[i].log_prob, WithinRel(0.75 * sa[i].log_prob + 0.25 * sb[i].log_prob, 1e-12));
  }
  const auto tokens = [](const std::vector<std::vector<Translation>>& result) {
    std::vector<std::vector<int32_t>> out;
    for (const auto& r : result) out.push_back(r.at(0).tokens);
    return out;
  };
  const auto together = tokens(both.translate(kLines));
  CHECK(together != tokens(a.translate(kLines)));
  CHECK(together != tokens(b.translate(kLines)));
}

TEST_CASE("an ensemble refuses a checkpoint of another vocabulary, naming both",
          "[decode][translator][ensemble]") {
  TinyRun run;
  TinyRun other(nmt::test::TinyVocab::kPlain, 250);
  const fs::path ours = run.save(10, 1);
  const fs::path theirs = other.save(10, 1);
  CHECK_THROWS_AS(Translator(options_for({ours, theirs}), nmt::config::stored_model_options),
                  nmt::ConfigError);
  CHECK_THROWS_WITH(
      Translator(options_for({ours, theirs}), nmt::config::stored_model_options),
      Contains(ours.string()) && Contains(theirs.string()) &&
          Contains("the source vocabularies (the SentencePiece models stored in the checkpoints) "
                   "differ"));
  TranslateOptions weights = options_for({ours, ours});
  weights.ensemble_weights = {1};
  CHECK_THROWS_WITH(Translator(weights, nmt::config::stored_model_options),
                    Contains("expected one weight per checkpoint (2), found 1"));
}

TEST_CASE("each model of an ensemble averages its run directory's newest checkpoints",
          "[decode][translator][ensemble]") {
  TinyRun run;
  const fs::path older = run.save(10, 3);
  const fs::path newer = run.save(20, 4);
  TranslateOptions averaged = options_for({run.path()});
  averaged.average = 2;
  TranslateOptions pair = averaged;
  pair.checkpoints = {run.path().string(), run.path().string()};
  Translator alone(averaged, nmt::config::stored_model_options);
  Translator both(pair, nmt::config::stored_model_options);
  for (const auto& model : both.models()) CHECK(model.files == std::vector<fs::path>{older, newer});
  const auto a = alone.translate(kLines), b = both.translate(kLines);
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(b[i].at(0).tokens == a[i].at(0).tokens);
    CHECK(b[i][0].score == a[i][0].score);
  }
}
