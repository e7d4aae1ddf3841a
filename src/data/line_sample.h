#pragma once
// A seeded, uniform sample of the lines of text files, drawn in one streaming pass that holds
// only the sample: what SentencePiece trains a vocabulary on. SentencePiece can draw such a
// sample itself, but it reads every line of the corpus through one iterator to do so (40M lines
// in 41 s at 20M pairs on two cores); here the files are read side by side, one thread each.
//
// Each line gets a key, a hash of (seed, file index, line number), and the sample is the lines
// with the smallest keys (bottom-k sampling): uniform without replacement, and the same lines
// for the same files and seed whatever the thread count or the order the files are read in,
// so every launcher and every rerun trains the same vocabulary.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace nmt::data {

/// Settings of a line sample.
struct LineSampleOptions {
  int64_t lines = 1000000;  ///< lines in the sample at most
  uint64_t seed = 1;        ///< which sample: the same seed and files give the same lines
  int threads = 1;          ///< files read at once, one thread each (the sample is the same)
  /// The progress line's name for the pass (util/phase_progress.h); empty: no progress lines.
  std::string progress_name = "sampling lines";
};

/// A sample and the lines it was drawn from.
struct LineSample {
  std::vector<std::string> lines;  ///< the sampled lines: file order, then line order
  int64_t lines_read = 0;          ///< non-blank lines of all the files (the population)
  double seconds = 0;              ///< time the pass took
};

/// Draws min(options.lines, non-blank lines) of the non-blank lines of `files` (plain or gzip),
/// each subset of that size alike likely; blank lines (empty or only spaces and tabs) are
/// neither drawn nor counted, as SentencePiece drops them. Throws DataError naming a file that
/// cannot be read.
LineSample sample_lines(const std::vector<std::filesystem::path>& files,
                        const LineSampleOptions& options);

}  // namespace nmt::data
