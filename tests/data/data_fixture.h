#pragma once
// A small real corpus for data tests: the first lines of the shipped DDTP sample, a
// 300-piece vocabulary trained on them and their token cache, built once per test binary.

#include <fstream>
#include <memory>
#include <string>

#include "data/corpus_reader.h"
#include "data/prepare.h"
#include "test_support.h"

namespace nmt::test {

/// Writes the first `lines` lines of a shipped data file (plain or gzip) into dir/name.
inline std::filesystem::path head_of(const TempDir& dir, const std::string& shipped,
                                     const std::string& name, int lines) {
  data::LineReader in(std::string(NMT_SOURCE_DIR) + "/data/" + shipped);
  std::string text, line;
  for (int i = 0; i < lines && in.next(&line); ++i) text += line + "\n";
  return dir.write(name, text);
}

/// The shared corpus, vocabulary and cache.
struct SmallCorpus {
  TempDir dir;
  data::DataOptions options;
  data::PreparedData prepared;

  SmallCorpus() {
    options.train_src = head_of(dir, "ddtp.en-de.train.en.gz", "train.en", 3000).string();
    options.train_tgt = head_of(dir, "ddtp.en-de.train.de.gz", "train.de", 3000).string();
    options.vocab_size = 500;
    options.max_len = 100;
    prepared = data::prepare_data(options, dir.path() / "run", {2, 1});
  }
  const data::TokenCache& cache() const { return prepared.train.parts()[0].cache; }
};

/// Every step of a plan, its batches copied out (EpochPlan stores them flat).
inline std::vector<data::Step> steps_of(const data::EpochPlan& plan) {
  std::vector<data::Step> steps;
  for (int64_t s = 0; s < plan.num_steps(); ++s) steps.push_back(plan.step(s));
  return steps;
}

inline const SmallCorpus& small_corpus() {
  static SmallCorpus corpus;
  return corpus;
}

}  // namespace nmt::test
