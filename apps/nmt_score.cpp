// nmt-score: sacreBLEU-exact BLEU, chrF and chrF++ of a hypothesis file against references.
#include <iostream>
#include <string>
#include <vector>

#include "config/score_cli.h"
#include "eval/bleu.h"
#include "eval/chrf.h"
#include "eval/text_file.h"
#include "util/error.h"
#include "util/main_guard.h"

namespace {

using namespace nmt;

int run(int argc, char** argv) {
  const config::ScoreCommand command = config::parse_score_command(argc, argv);
  if (command.exit_code) return *command.exit_code;
  const std::string hyp_name = command.input.empty() ? "<stdin>" : command.input;
  const std::vector<std::string> hyps = command.input.empty()
                                            ? eval::read_text_lines(std::cin, hyp_name)
                                            : eval::read_text_file(command.input);
  NMT_CHECK(!hyps.empty(), DataError, "{}: no lines to score (expected one hypothesis per line)",
            hyp_name);
  std::vector<std::vector<std::string>> refs;
  for (const std::string& ref : command.refs) {
    refs.push_back(eval::read_text_file(ref));
    NMT_CHECK(refs.back().size() == hyps.size(), DataError,
              "line counts differ: hypotheses {} has {} lines, references {} has {}", hyp_name,
              hyps.size(), ref, refs.back().size());
  }
  std::vector<eval::MetricScore> scores;
  for (const config::ScoreMetric metric : command.metrics) {
    if (metric == config::ScoreMetric::kBleu)
      scores.push_back(eval::to_metric_score(eval::corpus_bleu(hyps, refs)));
    else
      scores.push_back(eval::to_metric_score(
          eval::corpus_chrf(hyps, refs, metric == config::ScoreMetric::kChrfPlusPlus ? 2 : 0)));
  }
  std::vector<std::string> out;
  for (const eval::MetricScore& s : scores) {
    out.push_back(command.json         ? eval::format_json(s, command.width)
                  : command.score_only ? eval::format_fixed(s.score, command.width)
                                       : eval::format_text(s, command.width, true));
  }
  std::cout << (command.json ? eval::join_json(out) : eval::align_text_lines(out)) << std::flush;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return nmt::run_main("nmt-score", [&] { return run(argc, argv); });
}
