#pragma once
// SentencePiece's training log, turned into ours. SentencePiece trains without a word between
// reading its sentences and returning (at 5M pairs two minutes, at 50M longer): it only logs,
// at its INFO level, to std::cerr, in its own format. While a SpmTrainingLog is alive it takes
// std::cerr's lines, and says the phases (normalizing, suffix array, seed pieces), the EM
// rounds of a unigram model or the merges of a BPE model, with their rate and an ETA, as
// the other long phases do:
//
//   [data] vocabulary: Extracting frequent sub strings (12s in)
//   [data] vocabulary: EM rounds: 4 of 9 rounds (44%), 0.2 rounds/s, ETA 25s
//
// Its warnings and errors become ours; everything else it writes (its flag dump) is dropped.
//
//   SpmTrainingLog log(options.vocab_size);      // std::cerr is captured from here
//   SentencePieceTrainer::Train(args + " --minloglevel=0", ...);
//                                                // restored when `log` goes

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace nmt::data {

/// One line of SentencePiece's log ("unigram_model_trainer.cc(507) LOG(INFO) EM sub_iter=0
/// size=20962 obj=12.1"): its severity ("INFO", "WARNING", ...) and message.
struct SpmLogLine {
  std::string severity;
  std::string message;
};

/// The parts of a SentencePiece log line; nullopt for any other text.
std::optional<SpmLogLine> parse_spm_log_line(std::string_view line);

/// Unigram training prunes its pieces by `shrinking` (0.75) a round from `first_size` (the
/// size of the first EM round) until `target` (1.1 x vocab_size) is reached: the rounds in
/// all, first and last included.
int64_t unigram_em_rounds(int64_t first_size, int64_t target, double shrinking = 0.75);

/// Follows the messages of one training and logs its progress (component "data").
class SpmTrainingProgress {
 public:
  explicit SpmTrainingProgress(int64_t vocab_size);
  ~SpmTrainingProgress();
  SpmTrainingProgress(const SpmTrainingProgress&) = delete;
  SpmTrainingProgress& operator=(const SpmTrainingProgress&) = delete;

  /// One parsed log line.
  void on_line(const SpmLogLine& line);
  /// EM rounds done (unigram; the one running is not) or pieces reached (BPE) so far.
  int64_t done() const;
  /// Their total as estimated so far (0: not known yet).
  int64_t total() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// While alive, std::cerr's lines go to an SpmTrainingProgress instead of the terminal.
class SpmTrainingLog {
 public:
  explicit SpmTrainingLog(int64_t vocab_size);
  ~SpmTrainingLog();
  SpmTrainingLog(const SpmTrainingLog&) = delete;
  SpmTrainingLog& operator=(const SpmTrainingLog&) = delete;

 private:
  class LineBuffer;
  std::unique_ptr<LineBuffer> buffer_;
  std::streambuf* previous_;
};

}  // namespace nmt::data
