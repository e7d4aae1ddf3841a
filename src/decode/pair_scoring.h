#pragma once
// nmt-translate --score TGT as one process: reads the pairs (line i of the source file with
// line i of the target file) a chunk at a time, scores them teacher-forced
// (Translator::score) and writes one line per pair, in input order:
//
//   <sum of log-probabilities> TAB <sum / tokens> TAB <tokens>
//
// tokens being the target's pieces plus EOS (what training's per-token loss counts). No
// LibTorch here; a corpus on every rank goes through corpus_translation.h instead.

#include <cstdint>
#include <string>

#include "decode/translator.h"

namespace nmt::decode {

/// The output line of one pair, "\n"-terminated.
std::string score_line(const PairScore& score);

/// Lines of `source`, after checking that `target` has as many: DataError naming both files
/// and both counts otherwise.
int64_t count_pair_lines(const std::string& source, const std::string& target);

/// Scores the pairs of files `source` and `target` into `output` ("-": stdout). Throws
/// DataError for files of different line counts, invalid UTF-8 or a failed write.
TranslateStats score_file(Translator& translator, const std::string& source,
                          const std::string& target, const std::string& output);

}  // namespace nmt::decode
