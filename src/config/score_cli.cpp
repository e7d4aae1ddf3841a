#include "config/score_cli.h"

#include <algorithm>

#include <CLI/CLI.hpp>

#include "config/cli_exit.h"

namespace nmt::config {

ScoreCommand parse_score_command(int argc, const char* const* argv) {
  ScoreCommand command;
  CLI::App app{
      "nmt-score: corpus BLEU, chrF and chrF++ of detokenized translations, computed exactly as\n"
      "sacreBLEU 2.6.0 does with its default settings (the signature printed with each score\n"
      "says which), so the numbers are comparable with published sacreBLEU scores.",
      "nmt-score"};
  app.set_version_flag("--version", std::string(NMT_VERSION));
  std::vector<std::string> metric_names = {"bleu"};
  app.add_option("-r,--refs", command.refs,
                 "reference files, one reference stream each (line i of every file is a "
                 "reference of hypothesis line i)")
      ->required()
      ->expected(1, -1)
      ->check(CLI::ExistingFile)
      ->type_name("REF...");
  app.add_option("-i,--input", command.input,
                 "hypothesis file, one detokenized translation per line (default: stdin)")
      ->check(CLI::ExistingFile)
      ->type_name("HYP");
  app.add_option("-m,--metrics", metric_names,
                 "metrics to compute, printed in the order bleu, chrf, chrf++ (default: bleu)")
      ->expected(1, -1)
      ->check(CLI::IsMember({"bleu", "chrf", "chrf++"}, CLI::ignore_case))
      ->type_name("METRIC...");
  CLI::Option* json = app.add_flag("--json", command.json,
                                   "print each metric as sacreBLEU's JSON object (a list when "
                                   "there are several)");
  app.add_flag("-b,--score-only", command.score_only, "print only the score of each metric")
      ->excludes(json);
  app.add_option("-w,--width", command.width,
                 "decimals of the printed scores (default 2; sacreBLEU's command line uses 1)")
      ->check(CLI::Range(0, 10))
      ->type_name("N");
  app.footer(
      "Metrics (all case-sensitive, as sacreBLEU's defaults):\n"
      "  bleu    corpus BLEU: 13a tokenization (mteval-v13a, unescapes &quot; &amp; &lt; &gt;),\n"
      "          n-grams up to 4, 'exp' smoothing, brevity penalty against the closest\n"
      "          reference length. Text: BLEU|SIGNATURE = SCORE P1/P2/P3/P4 (BP = .. ratio = ..\n"
      "          hyp_len = .. ref_len = ..)\n"
      "  chrf    chrF2: character 1..6-grams, whitespace removed, beta 2\n"
      "  chrf++  chrF2++: chrF plus word 1..2-grams\n"
      "Input: UTF-8 text, one segment per line, trailing whitespace ignored; the hypothesis\n"
      "and every reference file must have the same number of lines. Reading stdin takes it as\n"
      "one system (tabs are not split into systems as sacreBLEU does).\n"
      "Errors (a line count mismatch, invalid UTF-8 with its file:line, an unreadable file)\n"
      "are reported as one line, with exit code 1 (2 for a wrong command line, a file that does\n"
      "not exist included).");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    command.exit_code = usage_exit_code(app, e);
    return command;
  }
  command.metrics.clear();
  for (const auto& [name, metric] :
       {std::pair{"bleu", ScoreMetric::kBleu}, std::pair{"chrf", ScoreMetric::kChrf},
        std::pair{"chrf++", ScoreMetric::kChrfPlusPlus}}) {
    const bool wanted = std::any_of(metric_names.begin(), metric_names.end(), [&](std::string m) {
      std::transform(m.begin(), m.end(), m.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      return m == name;
    });
    if (wanted) command.metrics.push_back(metric);
  }
  return command;
}

}  // namespace nmt::config
