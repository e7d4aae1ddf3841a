#pragma once
// What the tests of the training loop's components (trainer, validator) run on: the first
// lines of the shipped DDTP sample and of its validation set, a 300-piece joint vocabulary
// trained on them (once per test binary), and the RunSetup of a one-layer model on the CPU,
// single process, so that a run of a few updates takes well under a second.

#include <filesystem>
#include <string>

#include "data/data_fixture.h"
#include "data/prepare.h"
#include "test_support.h"
#include "train/run_setup.h"

namespace nmt::test {

/// Pairs of the training slice and of the validation slice.
constexpr int kLoopTrainPairs = 1000;
constexpr int kLoopValidPairs = 24;

/// The corpus, vocabulary and token caches shared by the cases of one test binary.
struct LoopData {
  TempDir dir;
  data::DataOptions options;
  data::PreparedData prepared;

  LoopData() {
    options.train_src =
        head_of(dir, "ddtp.en-de.train.en.gz", "train.en", kLoopTrainPairs).string();
    options.train_tgt =
        head_of(dir, "ddtp.en-de.train.de.gz", "train.de", kLoopTrainPairs).string();
    options.valid_src = head_of(dir, "ddtp.en-de.valid.en", "valid.en", kLoopValidPairs).string();
    options.valid_tgt = head_of(dir, "ddtp.en-de.valid.de", "valid.de", kLoopValidPairs).string();
    options.vocab_size = 300;
    options.max_len = 100;
    options.max_tokens = 1024;
    options.prefetch = 2;
    prepared = data::prepare_data(options, dir.path() / "data", {2, 1});
  }
};

inline const LoopData& loop_data() {
  static LoopData data;
  return data;
}

/// One rank's run of a tiny model on `data` in `run_dir`: 1+1 layers of width 32, a short
/// warm-up, no validation and no checkpoint unless a case asks for them.
inline train::RunSetup tiny_run_setup(const std::filesystem::path& run_dir,
                                      const data::DataOptions& data = loop_data().options) {
  train::RunSetup s;
  s.model.encoder_layers = 1;
  s.model.decoder_layers = 1;
  s.model.d_model = 32;
  s.model.heads = 4;
  s.model.ffn_dim = 64;
  s.model.max_positions = 128;
  s.data = data;
  s.max_tokens = data.max_tokens.value_or(1024);  // resolved, as rank setup leaves it
  s.train.max_steps = 6;
  s.train.lr = 1e-3;
  s.train.warmup_steps = 2;
  s.train.log_every = 2;
  s.train.valid_every = 0;
  s.checkpoint.every_steps = 1000;
  s.checkpoint.keep_last = 10;
  s.run_dir = run_dir;
  s.config_yaml = "test: tiny run\n";
  s.config_hash = "tiny";
  return s;
}

}  // namespace nmt::test
