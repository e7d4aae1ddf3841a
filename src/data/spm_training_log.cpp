#include "data/spm_training_log.h"

#include <chrono>
#include <cmath>
#include <iostream>
#include <mutex>
#include <regex>
#include <streambuf>

#include "util/duration.h"
#include "util/log.h"
#include "util/phase_progress.h"
#include "util/timer.h"

namespace nmt::data {

std::optional<SpmLogLine> parse_spm_log_line(std::string_view line) {
  // "<file>.cc(<line>) LOG(<SEVERITY>) <message>"
  static const std::regex format(R"(^[A-Za-z0-9_]+\.cc\(\d+\) LOG\(([A-Z]+)\) ?(.*)$)");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_match(line.begin(), line.end(), m, format)) return std::nullopt;
  return SpmLogLine{m[1].str(), m[2].str()};
}

int64_t unigram_em_rounds(int64_t first_size, int64_t target, double shrinking) {
  if (first_size <= target || target <= 0) return 1;
  const double pruning_rounds =
      std::ceil(std::log(double(target) / double(first_size)) / std::log(shrinking) - 1e-9);
  return 1 + static_cast<int64_t>(pruning_rounds);
}

namespace {

/// The number after `key` in `message` ("size=20962" -> 20962), or -1.
int64_t number_after(const std::string& message, const std::string& key) {
  const auto at = message.find(key);
  if (at == std::string::npos) return -1;
  try {
    return std::stoll(message.substr(at + key.size()));
  } catch (const std::exception&) {
    return -1;
  }
}

bool starts_with(const std::string& text, std::string_view prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

/// The messages that begin a phase worth a line of its own.
constexpr std::string_view kPhases[] = {
    "Loaded all", "Normalizing sentences", "Making suffix array", "Extracting frequent",
    "Initialized", "Using"};

}  // namespace

struct SpmTrainingProgress::State {
  int64_t vocab_size;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::optional<log::PhaseProgress> rounds;  // unigram: EM rounds
  std::optional<log::PhaseProgress> merges;  // BPE: pieces added
  int64_t done = 0, total = 0;

  double seconds() const { return seconds_since(start); }
};

SpmTrainingProgress::SpmTrainingProgress(int64_t vocab_size)
    : state_(std::make_unique<State>()) {
  state_->vocab_size = vocab_size;
}

SpmTrainingProgress::~SpmTrainingProgress() {
  State& s = *state_;
  // The last round is over when the training is.
  if (s.rounds && s.rounds->reported()) s.rounds->finish(double(s.done + 1));
  if (s.merges && s.merges->reported()) s.merges->finish(double(s.done));
}

void SpmTrainingProgress::on_line(const SpmLogLine& line) {
  State& s = *state_;
  const std::string& m = line.message;
  if (line.severity != "INFO") {
    log::warn("data", "SentencePiece: {}", m);
    return;
  }
  if (starts_with(m, "EM sub_iter=")) {
    // Each round starts with sub-iteration 0; the rounds before it are done.
    if (number_after(m, "sub_iter=") != 0) return;
    if (!s.rounds) {
      // SentencePiece prunes towards 1.1 x the vocabulary (its desired_vocab_size_).
      s.total = unigram_em_rounds(number_after(m, "size="),
                                  static_cast<int64_t>(double(s.vocab_size) * 1.1));
      s.rounds.emplace("data", "vocabulary: EM rounds", "rounds", double(s.total));
    } else {
      ++s.done;
      s.rounds->update(double(s.done));
    }
    return;
  }
  if (starts_with(m, "Added: ")) {
    if (!s.merges) {
      s.total = s.vocab_size;
      s.merges.emplace("data", "vocabulary: BPE pieces", "pieces", double(s.total));
    }
    s.done = std::max(s.done, number_after(m, "size="));
    s.merges->update(double(s.done));
    return;
  }
  for (std::string_view phase : kPhases) {
    if (starts_with(m, phase)) {
      log::info("data", "vocabulary: {} ({} in)", m, format_duration(s.seconds()));
      return;
    }
  }
  log::debug("data", "SentencePiece: {}", m);
}

int64_t SpmTrainingProgress::done() const { return state_->done; }

int64_t SpmTrainingProgress::total() const { return state_->total; }

/// A stream buffer that hands each complete line to an SpmTrainingProgress. SentencePiece
/// may log from its worker threads: one line at a time.
class SpmTrainingLog::LineBuffer : public std::streambuf {
 public:
  explicit LineBuffer(int64_t vocab_size) : progress_(vocab_size) {}
  ~LineBuffer() override {
    if (!line_.empty()) take_line();
  }

 protected:
  int overflow(int c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    std::lock_guard<std::mutex> lock(mutex_);
    put(static_cast<char>(c));
    return c;
  }
  std::streamsize xsputn(const char* text, std::streamsize count) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::streamsize i = 0; i < count; ++i) put(text[i]);
    return count;
  }

 private:
  void put(char c) {
    if (c != '\n') {
      line_ += c;
      return;
    }
    take_line();
  }
  void take_line() {
    // Lines that are not log lines (the dump of its flags) are dropped.
    if (const auto parsed = parse_spm_log_line(line_)) progress_.on_line(*parsed);
    line_.clear();
  }

  std::mutex mutex_;
  std::string line_;
  SpmTrainingProgress progress_;
};

SpmTrainingLog::SpmTrainingLog(int64_t vocab_size)
    : buffer_(std::make_unique<LineBuffer>(vocab_size)) {
  std::cerr.flush();
  previous_ = std::cerr.rdbuf(buffer_.get());
}

SpmTrainingLog::~SpmTrainingLog() {
  std::cerr.flush();
  std::cerr.rdbuf(previous_);
}

}  // namespace nmt::data
