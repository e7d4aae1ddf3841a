// Fuzz target: the corpus path from bytes on disk to scores: the input is split at its first
// NUL byte into a source and a target file (plain or gzip, as the bytes say), read in step by
// read_parallel under both invalid-UTF-8 policies, and every pair is tokenized (sacreBLEU 13a)
// and scored (BLEU and chrF++ statistics). Inputs either pass or fail with nmt::Error.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "data/corpus_reader.h"
#include "eval/bleu.h"
#include "eval/chrf.h"
#include "eval/tokenizer.h"
#include "util/error.h"

namespace {

/// Two files in a private folder, rewritten for every input.
struct Files {
  std::filesystem::path dir;
  std::filesystem::path src, tgt;
  Files() {
    char pattern[] = "/tmp/nmt-fuzz-corpus-XXXXXX";
    dir = ::mkdtemp(pattern);
    src = dir / "src.txt";
    tgt = dir / "tgt.txt";
  }
  ~Files() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

void write(const std::filesystem::path& file, std::string_view bytes) {
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(bytes.data(),
                                                              static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Files files;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  write(files.src, input.substr(0, split));
  write(files.tgt, split == std::string_view::npos ? std::string_view() : input.substr(split + 1));
  for (const auto policy : {nmt::data::InvalidUtf8Policy::kSkip, nmt::data::InvalidUtf8Policy::kError}) {
    std::vector<std::string> sources, targets;
    nmt::data::FilterCounts counts;
    try {
      nmt::data::read_parallel(
          files.src, files.tgt, policy,
          [&](int64_t, std::string_view s, std::string_view t) {
            sources.emplace_back(s);
            targets.emplace_back(t);
          },
          &counts);
    } catch (const nmt::Error&) {
      continue;  // a clear rejection (different line counts, invalid UTF-8)
    }
    if (counts.read < static_cast<int64_t>(sources.size())) __builtin_trap();
    nmt::eval::Tokenizer13a tokenize;
    for (const std::string& s : sources) {
      const std::string words = tokenize(s);
      // Tokenized text is words joined by single spaces.
      if (!words.empty() && (words.front() == ' ' || words.back() == ' ')) __builtin_trap();
    }
    if (sources.empty()) continue;
    try {
      const auto bleu = nmt::eval::compute_bleu(nmt::eval::bleu_stats(sources, {targets}));
      const auto chrf = nmt::eval::compute_chrf(nmt::eval::chrf_stats(sources, {targets}, 2));
      if (!(bleu.score >= 0 && bleu.score <= 100.0001)) __builtin_trap();
      if (!(chrf.score >= 0 && chrf.score <= 100.0001)) __builtin_trap();
    } catch (const nmt::Error&) {
    }
  }
  return 0;
}
