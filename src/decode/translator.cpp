#include "decode/translator.h"

#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <numeric>
#include <optional>
#include <sstream>

#include <fmt/ranges.h>

#include "amp/autocast.h"
#include "data/corpus_reader.h"
#include "data/vocab.h"
#include "decode/batch_search.h"
#include "decode/ensemble.h"
#include "decode/forced_scores.h"
#include "decode/model_loading.h"
#include "decode/sampling.h"
#include "decode/search.h"
#include "model/transformer.h"
#include "util/error.h"
#include "util/log.h"
#include "util/phase_progress.h"
#include "util/timer.h"
#include "util/utf8.h"

namespace nmt::decode {
namespace {

/// Input lines translated and written per chunk (each chunk is sorted by length).
constexpr size_t kChunkLines = 10000;
/// Time between progress lines.
constexpr std::chrono::seconds kProgressEvery{5};

/// Every line of `input` ("-" or empty: stdin), checked for UTF-8 (DataError naming file:line).
std::vector<std::string> read_input(const std::string& input) {
  const bool from_stdin = input.empty() || input == "-";
  const std::string input_name = from_stdin ? "<stdin>" : input;
  std::vector<std::string> lines;
  auto add = [&](std::string line) {
    const size_t bad = find_invalid_utf8(line);
    NMT_CHECK(bad == std::string_view::npos, DataError, "{}:{}: invalid UTF-8 at byte {}",
              input_name, lines.size() + 1, bad + 1);
    lines.push_back(std::move(line));
  };
  if (from_stdin) {
    std::string line;
    while (std::getline(std::cin, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      add(std::move(line));
    }
    NMT_CHECK(!std::cin.bad(), DataError, "<stdin>: read error after line {}", lines.size());
  } else {
    data::LineReader reader(input);
    std::string line;
    while (reader.next(&line)) add(line);
  }
  return lines;
}

/// The models' views for search, with their weights.
std::vector<model::TransformerImpl*> views(const std::vector<LoadedModel>& models) {
  std::vector<model::TransformerImpl*> out;
  for (const LoadedModel& m : models) out.push_back(m.model.ptr().get());
  return out;
}

/// The options after the checks the constructor relies on, with LibTorch's threads set.
const TranslateOptions& checked(const TranslateOptions& options) {
  check_translate_options(options);
  if (options.threads > 0) at::set_num_threads(static_cast<int>(options.threads));
  return options;
}

/// Where the models run, once --amp is known to work there.
at::Device device_for(const TranslateOptions& options) {
  const at::Device device = pick_device(options.device, options.cuda_index);
  NMT_CHECK(amp::autocast_supported(options.amp, device.type()), ConfigError,
            "--amp {} is not supported on {}", amp::mode_name(options.amp), device.str());
  return device;
}

}  // namespace

struct Translator::Impl {
  TranslateOptions options;
  at::Device device;
  std::vector<LoadedModel> loaded;  ///< one per -c; the first's vocabularies and ids serve all
  Ensemble models;                  ///< the loaded models, weighted
  std::vector<ModelSource> sources;
  log::PhaseProgress* progress = nullptr;  ///< set during translate_file, when it reports
  const std::function<void(int64_t)>* on_batch = nullptr;  ///< set during translate(..., on_batch)
  int64_t done = 0;                        ///< sentences translated so far in translate_file

  Impl(const TranslateOptions& o, const ModelConfigReader& read_config)
      : options(checked(o)),
        device(device_for(options)),
        loaded(load_models(options, device, read_config)),
        models(views(loaded), options.ensemble_weights) {
    for (size_t i = 0; i < loaded.size(); ++i)
      sources.push_back({loaded[i].files, models.weight(i), loaded[i].load_seconds});
    if (loaded.size() > 1)
      log::info("translate", "an ensemble of {} models, weights {}", loaded.size(),
                fmt::join(models.weights(), ", "));
  }

  const data::Vocab& src_vocab() const { return loaded.front().src_vocab; }
  const data::Vocab& tgt_vocab() const { return loaded.front().tgt_vocab; }
  const SearchIds& ids() const { return loaded.front().ids; }

  /// Source ids (+EOS) of a line, cut to what every encoder accepts; empty for a blank line.
  /// The tag goes in by id: src_vocab.encode never yields one, even for the text `<2de>`
  /// (a vocabulary with user-defined tags is loaded with them as control symbols, vocab.h).
  std::vector<int64_t> encode(const std::string& line, int64_t* truncated) const {
    std::vector<int32_t> pieces = src_vocab().encode(line);
    if (pieces.empty()) return {};
    const std::vector<int32_t>& prefix = loaded.front().prefix;
    pieces.insert(pieces.begin(), prefix.begin(), prefix.end());
    const int64_t keep = std::min<int64_t>(pieces.size(), models.max_positions() - 1);
    if (keep < static_cast<int64_t>(pieces.size())) ++*truncated;
    std::vector<int64_t> ids_out(pieces.begin(), pieces.begin() + keep);
    ids_out.push_back(src_vocab().eos_id());
    return ids_out;
  }

  /// Target ids to predict before EOS: the forced prefix and the line's pieces, cut to the
  /// models' positions.
  std::vector<int64_t> encode_target(const std::string& line) const {
    std::vector<int64_t> out(ids().forced_prefix.begin(), ids().forced_prefix.end());
    for (const int32_t piece : tgt_vocab().encode(line)) out.push_back(piece);
    out.resize(std::min<size_t>(out.size(), models.max_positions() - 1));
    return out;
  }

  /// Translates lines (already checked for UTF-8), batched by padded source tokens; the
  /// first is input line first_line (0-based), which names the sentences' sampling streams.
  std::vector<std::vector<Translation>> run(const std::vector<std::string>& lines,
                                            TranslateStats* stats, int64_t first_line = 0) {
    std::vector<std::vector<int64_t>> sources_ids(lines.size());
    int64_t truncated = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
      sources_ids[i] = encode(lines[i], &truncated);
      if (stats) stats->source_tokens += static_cast<int64_t>(sources_ids[i].size());
    }
    if (truncated > 0)
      log::warn("translate", "{} line(s) longer than the model's {} positions were cut", truncated,
                models.max_positions());
    const BatchSearchOptions batching{options.max_tokens, src_vocab().pad_id(), device, options.amp,
                                      options.search};
    const int64_t done_before = done;
    const auto report = [&](int64_t n) {
      done = done_before + n;
      if (progress) progress->update(double(done));
      if (on_batch && *on_batch) (*on_batch)(done);
    };
    std::vector<std::vector<Hypothesis>> hyps =
        search_batches(models, ids(), sources_ids, first_line, batching, report);
    done = done_before + static_cast<int64_t>(lines.size());
    std::vector<std::vector<Translation>> out(lines.size());
    for (size_t i = 0; i < lines.size(); ++i) {
      for (Hypothesis& h : hyps[i]) {
        Translation t;
        t.text = tgt_vocab().decode(h.tokens);
        t.tokens = std::move(h.tokens);
        t.score = h.score;
        t.normalized_score = h.normalized_score;
        out[i].push_back(std::move(t));
      }
      // Blank lines get nbest empty texts; a sentence ends with fewer hypotheses only with a
      // vocabulary smaller than 2 x beam.
      out[i].resize(options.search.nbest);
    }
    return out;
  }

  void write(std::ostream& out, const std::vector<Translation>& translations) const {
    for (const Translation& t : translations) {
      out << t.text;
      if (options.with_scores) out << '\t' << fmt::format("{:.6f}", t.normalized_score);
      out << '\n';
    }
  }
};

Translator::Translator(const TranslateOptions& options, const ModelConfigReader& read_config)
    : impl_(std::make_unique<Impl>(options, read_config)) {}

Translator::~Translator() = default;

std::vector<int64_t> Translator::source_ids(const std::string& line) const {
  int64_t truncated = 0;
  return impl_->encode(line, &truncated);
}

const std::vector<ModelSource>& Translator::models() const { return impl_->sources; }

std::string Translator::device_name() const { return impl_->device.str(); }

std::vector<std::vector<Translation>> Translator::translate(const std::vector<std::string>& lines) {
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t bad = find_invalid_utf8(lines[i]);
    NMT_CHECK(bad == std::string_view::npos, DataError, "line {}: invalid UTF-8 at byte {}", i + 1,
              bad + 1);
  }
  return impl_->run(lines, nullptr);
}

std::vector<std::vector<Translation>> Translator::translate(
    const std::vector<std::string>& lines, int64_t first_line, TranslateStats* stats,
    const std::function<void(int64_t)>& on_batch) {
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t bad = find_invalid_utf8(lines[i]);
    NMT_CHECK(bad == std::string_view::npos, DataError, "line {}: invalid UTF-8 at byte {}",
              first_line + static_cast<int64_t>(i) + 1, bad + 1);
  }
  impl_->done = 0;
  impl_->on_batch = &on_batch;
  struct Reset {
    Impl* impl;
    ~Reset() { impl->on_batch = nullptr; }
  } reset{impl_.get()};
  std::vector<std::vector<Translation>> out = impl_->run(lines, stats, first_line);
  if (stats) {
    stats->sentences += static_cast<int64_t>(lines.size());
    for (const auto& translations : out)
      if (!translations.empty()) stats->output_tokens += translations[0].tokens.size();
  }
  return out;
}

std::vector<PairScore> Translator::score(const std::vector<std::string>& sources,
                                         const std::vector<std::string>& targets,
                                         int64_t first_line, TranslateStats* stats,
                                         const std::function<void(int64_t)>& on_batch) {
  NMT_CHECK(sources.size() == targets.size(), DataError,
            "lines {}..: {} source lines but {} target lines", first_line + 1, sources.size(),
            targets.size());
  std::vector<std::vector<int64_t>> src(sources.size()), tgt(targets.size());
  int64_t truncated = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    for (const std::string* line : {&sources[i], &targets[i]}) {
      const size_t bad = find_invalid_utf8(*line);
      NMT_CHECK(bad == std::string_view::npos, DataError, "line {}: invalid UTF-8 at byte {}",
                first_line + static_cast<int64_t>(i) + 1, bad + 1);
    }
    src[i] = impl_->encode(sources[i], &truncated);
    if (src[i].empty()) src[i].push_back(impl_->src_vocab().eos_id());
    tgt[i] = impl_->encode_target(targets[i]);
  }
  const ForcedScoreOptions options{impl_->options.max_tokens, impl_->device, impl_->options.amp};
  const SearchIds& search_ids = impl_->ids();
  const ForcedIds ids{search_ids.start, search_ids.eos, search_ids.pad};
  std::vector<PairScore> out = forced_scores(impl_->models, ids, src, tgt, options, on_batch);
  if (stats) {
    stats->sentences += static_cast<int64_t>(out.size());
    for (size_t i = 0; i < out.size(); ++i) {
      stats->source_tokens += static_cast<int64_t>(src[i].size());
      stats->output_tokens += out[i].tokens;
    }
  }
  return out;
}

std::string Translator::output_text(const std::vector<Translation>& translations) const {
  std::ostringstream out;
  impl_->write(out, translations);
  return out.str();
}

TranslateStats Translator::translate_file(const std::string& input, const std::string& output) {
  const auto start = Clock::now();
  // Read everything first: the line count gives the ETA, and bad input fails before any work.
  const std::vector<std::string> lines = read_input(input);

  std::ofstream file;
  const bool to_stdout = output.empty() || output == "-";
  if (!to_stdout) {
    file.open(output, std::ios::binary | std::ios::trunc);
    NMT_CHECK(file.is_open(), DataError, "{}: cannot open for writing", output);
  }
  std::ostream& out = to_stdout ? std::cout : file;

  TranslateStats stats;
  stats.sentences = static_cast<int64_t>(lines.size());
  std::optional<log::PhaseProgress> progress;
  if (::isatty(STDERR_FILENO) || stats.sentences >= impl_->options.progress_min_lines)
    progress.emplace("translate", "translating", "sentences", double(stats.sentences),
                     kProgressEvery);
  impl_->progress = progress ? &*progress : nullptr;
  impl_->done = 0;
  struct ResetProgress {
    Impl* impl;
    ~ResetProgress() { impl->progress = nullptr; }
  } reset{impl_.get()};
  for (size_t begin = 0; begin < lines.size(); begin += kChunkLines) {
    const size_t end = std::min(lines.size(), begin + kChunkLines);
    const std::vector<std::string> chunk(lines.begin() + begin, lines.begin() + end);
    const std::vector<std::vector<Translation>> results =
        impl_->run(chunk, &stats, static_cast<int64_t>(begin));
    for (const auto& translations : results) {
      impl_->write(out, translations);
      if (!translations.empty()) stats.output_tokens += translations[0].tokens.size();
    }
    out.flush();
    NMT_CHECK(out.good(), DataError, "{}: write failed", to_stdout ? "<stdout>" : output);
  }
  stats.seconds = seconds_since(start);
  const SearchOptions& searched = impl_->options.search;
  log::info(
      "translate", "{} sentences in {:.2f} s: {:.1f} sentences/s, {:.1f} output tokens/s ({}, {})",
      stats.sentences, stats.seconds, stats.seconds > 0 ? stats.sentences / stats.seconds : 0.0,
      stats.seconds > 0 ? stats.output_tokens / stats.seconds : 0.0,
      searched.sampling ? "sampling " + describe(*searched.sampling)
                        : fmt::format("beam {}", searched.beam),
      searched.cached ? "cached" : "uncached");
  return stats;
}

}  // namespace nmt::decode
