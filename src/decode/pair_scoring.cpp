#include "decode/pair_scoring.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <vector>

#include <fmt/format.h>

#include "data/corpus_reader.h"
#include "util/error.h"
#include "util/log.h"
#include "util/timer.h"

namespace nmt::decode {
namespace {

/// Pairs read, scored and written per chunk (each chunk is batched in length order).
constexpr size_t kChunkPairs = 10000;

int64_t lines_in(const std::string& file) {
  data::LineReader reader(file);
  std::string line;
  while (reader.next(&line)) {
  }
  return reader.line_number();
}

/// Up to kChunkPairs lines of reader.
std::vector<std::string> read_chunk(data::LineReader& reader) {
  std::vector<std::string> lines;
  std::string line;
  while (lines.size() < kChunkPairs && reader.next(&line)) lines.push_back(line);
  return lines;
}

}  // namespace

std::string score_line(const PairScore& score) {
  const double mean = score.tokens > 0 ? score.log_prob / double(score.tokens) : 0.0;
  return fmt::format("{:.6f}\t{:.6f}\t{}\n", score.log_prob, mean, score.tokens);
}

int64_t count_pair_lines(const std::string& source, const std::string& target) {
  NMT_CHECK(source != "-" && !source.empty(), ConfigError,
            "--score: the source must be a file (-i FILE), not stdin: its lines are counted "
            "against the target's first");
  const int64_t sources = lines_in(source), targets = lines_in(target);
  NMT_CHECK(sources == targets, DataError,
            "--score: {} has {} lines but {} has {}: a target line is needed for each source "
            "line",
            source, sources, target, targets);
  return sources;
}

TranslateStats score_file(Translator& translator, const std::string& source,
                          const std::string& target, const std::string& output) {
  const auto start = Clock::now();
  const int64_t lines = count_pair_lines(source, target);
  std::ofstream file;
  const bool to_stdout = output.empty() || output == "-";
  if (!to_stdout) {
    file.open(output, std::ios::binary | std::ios::trunc);
    NMT_CHECK(file.is_open(), DataError, "{}: cannot open for writing", output);
  }
  std::ostream& out = to_stdout ? std::cout : file;
  data::LineReader sources(source), targets(target);
  TranslateStats stats;
  for (int64_t first = 0; first < lines; first += static_cast<int64_t>(kChunkPairs)) {
    const std::vector<std::string> src = read_chunk(sources), tgt = read_chunk(targets);
    for (const PairScore& score : translator.score(src, tgt, first, &stats, {}))
      out << score_line(score);
    out.flush();
    NMT_CHECK(out.good(), DataError, "{}: write failed", to_stdout ? "<stdout>" : output);
  }
  stats.seconds = seconds_since(start);
  log::info("translate", "scored {} pairs ({} target tokens) in {:.2f} s: {:.1f} pairs/s",
            stats.sentences, stats.output_tokens, stats.seconds,
            stats.seconds > 0 ? double(stats.sentences) / stats.seconds : 0.0);
  return stats;
}

}  // namespace nmt::decode
