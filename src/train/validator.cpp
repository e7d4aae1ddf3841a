#include "train/validator.h"

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "amp/autocast.h"
#include "data/batch_tensors.h"
#include "data/corpus_reader.h"
#include "data/prepare.h"
#include "decode/search.h"
#include "dist/sum_over_ranks.h"
#include "eval/bleu.h"
#include "eval/chrf.h"
#include "model/transformer.h"
#include "train/loss.h"
#include "util/error.h"
#include "util/timer.h"

namespace nmt::train {
namespace {

double set_selection(const SetScores& set, BestMetric metric) {
  switch (metric) {
    case BestMetric::kBleu:
      return -set.bleu.value_or(0);
    case BestMetric::kChrf:
      return -set.chrf.value_or(0);
    case BestMetric::kLoss:
      break;
  }
  return set.loss;
}

}  // namespace

double selection_of(const ValidationResult& v, const std::string& best_set, BestMetric metric) {
  if (best_set.empty() || best_set == v.first.name) return set_selection(v.first, metric);
  if (best_set == kMeanOfSets) {
    double sum = set_selection(v.first, metric);
    for (const SetScores& set : v.others) sum += set_selection(set, metric);
    return sum / double(1 + v.others.size());
  }
  for (const SetScores& set : v.others)
    if (set.name == best_set) return set_selection(set, metric);
  NMT_THROW(ConfigError, "train.best_set: no validation set is named {}", best_set);
}

struct Validator::State {
  RunSetup setup;
  const data::PreparedData& data;
  /// Per validation set, its target lines, for BLEU and chrF.
  std::vector<std::vector<std::string>> references;

  State(const RunSetup& s, const data::PreparedData& d) : setup(s), data(d) {}

  /// Loss (and translation scores) of one validation set, summed over the ranks.
  SetScores validate_set(model::Transformer& model, size_t index);

  /// BLEU and chrF of all ranks' translations: sacreBLEU statistics summed over ranks.
  void score(const std::vector<std::string>& hypotheses, const std::vector<std::string>& refs,
             SetScores* v) {
    eval::BleuStats bleu = eval::bleu_stats(hypotheses, {refs});
    eval::ChrfStats chrf = eval::chrf_stats(hypotheses, {refs});
    std::vector<dist::SummedField> fields = {bleu.sys_len, bleu.ref_len};
    fields.insert(fields.end(), bleu.counts.begin(), bleu.counts.end());
    fields.insert(fields.end(), bleu.totals.begin(), bleu.totals.end());
    fields.insert(fields.end(), chrf.stats.begin(), chrf.stats.end());
    dist::sum_over_ranks(setup.communicator.get(), fields);
    v->bleu = eval::compute_bleu(bleu).score;
    v->chrf = eval::compute_chrf(chrf).score;
  }
};

Validator::Validator(const RunSetup& setup, const data::PreparedData& data)
    : s_(std::make_unique<State>(setup, data)) {
  NMT_CHECK(!data.valid.empty(), ConfigError,
            "validation needs data.valid, or data.valid_src and data.valid_tgt");
  s_->references.resize(data.valid.size());
  if (setup.train.valid_translate) {
    for (size_t k = 0; k < data.valid.size(); ++k) {
      data::LineReader reader(data.valid[k].tgt);
      for (std::string line; reader.next(&line);) s_->references[k].push_back(line);
    }
  }
}

Validator::~Validator() = default;

SetScores Validator::State::validate_set(model::Transformer& model, size_t index) {
  const data::ValidationSet& set = data.valid[index];
  const data::BatchPlanner planner(
      set.cache, data::plan_options(setup.data, setup.max_tokens, setup.world_size,
                                    static_cast<uint64_t>(setup.train.seed)));
  const data::EpochPlan plan = planner.plan_epoch(1);
  at::Tensor loss = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(setup.device));
  at::Tensor nll = at::zeros_like(loss);
  int64_t tokens = 0;
  const data::SpecialIds ids = batch_ids(setup.model, data.vocab);
  std::vector<std::string> hypotheses, refs;
  for (int64_t step = 0; step < plan.num_steps(); ++step) {
    const data::Batch batch = plan.batch(step, setup.rank);
    if (batch.size() == 0) continue;
    const auto t = data::make_batch_tensors(set.cache, batch, ids);
    const at::Tensor src = t.src.to(setup.device);
    {
      amp::AutocastScope autocast(setup.precision, setup.device.type());
      const at::Tensor logits = model->forward(src, t.tgt_in.to(setup.device));
      const LossSums sums = label_smoothed_cross_entropy(
          logits, t.tgt_out.to(setup.device), setup.train.label_smoothing, data.vocab.tgt.pad_id());
      loss.add_(sums.loss.to(at::kDouble));
      nll.add_(sums.nll.to(at::kDouble));
    }
    tokens += t.tgt_tokens;
    if (!setup.train.valid_translate) continue;
    // On a CPU the search runs in fp32 whatever the run's precision: its products have a row
    // per open sentence, where bf16 kernels cost more than they save (the demo's 1,000
    // validation sentences: 6.4 s in bf16, 2.6 s in fp32, nmt-translate --beam 1 on one
    // checkpoint), and nmt-translate translates in fp32 unless told. On a GPU it keeps the
    // run's.
    const amp::AmpMode search_mode =
        setup.device.is_cuda() ? setup.precision : amp::AmpMode::kOff;
    amp::AutocastScope autocast(search_mode, setup.device.type());
    decode::SearchOptions search;
    search.beam = setup.train.valid_beam;
    search.nbest = 1;
    search.scores = false;  // BLEU and chrF read the texts only
    const decode::SearchIds search_ids{ids.decoder_start,
                                       data.vocab.tgt.bos_id(),
                                       ids.eos,
                                       data.vocab.tgt.pad_id(),
                                       {set.tgt_prefix.begin(), set.tgt_prefix.end()}};
    const auto found = decode::search(*model, src, search_ids, search);
    for (size_t row = 0; row < found.size(); ++row) {
      hypotheses.push_back(data.vocab.tgt.decode(found[row].front().tokens));
      const int64_t line = set.cache.line_number(batch.pairs[row]);
      refs.push_back(references[index].at(static_cast<size_t>(line - 1)));
    }
  }
  SetScores v;
  v.name = set.name;
  v.pair = set.pair;
  double loss_sum = loss.item<double>(), nll_sum = nll.item<double>();
  dist::sum_over_ranks(setup.communicator.get(), {loss_sum, nll_sum, tokens});
  v.tokens = tokens;
  v.loss = loss_sum / double(std::max<int64_t>(1, v.tokens));
  v.nll = nll_sum / double(std::max<int64_t>(1, v.tokens));
  if (setup.train.valid_translate) score(hypotheses, refs, &v);
  return v;
}

ValidationResult Validator::validate(model::Transformer& model) {
  const auto start = std::chrono::steady_clock::now();
  const RunSetup& setup = s_->setup;
  model->eval();
  at::NoGradGuard no_grad;
  ValidationResult v;
  v.first = s_->validate_set(model, 0);
  for (size_t k = 1; k < s_->data.valid.size(); ++k) v.others.push_back(s_->validate_set(model, k));
  v.selection = selection_of(v, setup.train.best_set, setup.train.best_metric);
  // A NaN (a diverged model) is never the best, and a NaN best is beaten by any number: NaN
  // compares false both ways, so a first validation of NaN blocked every later improvement.
  v.best =
      !std::isnan(v.selection) && (!record_.best_selection || std::isnan(*record_.best_selection) ||
                                   v.selection < *record_.best_selection);
  if (v.best) {
    record_.best_selection = v.selection;
    record_.without_improvement = 0;
  } else {
    ++record_.without_improvement;
  }
  v.without_improvement = record_.without_improvement;
  v.seconds = seconds_since(start);
  return v;
}

bool Validator::patience_exhausted() const {
  return s_->setup.train.patience > 0 && record_.without_improvement >= s_->setup.train.patience;
}

const char* Validator::metric_name() const {
  switch (s_->setup.train.best_metric) {
    case BestMetric::kBleu:
      return "BLEU";
    case BestMetric::kChrf:
      return "chrF";
    case BestMetric::kLoss:
      break;
  }
  return "validation loss";
}

}  // namespace nmt::train
