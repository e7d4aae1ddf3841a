#pragma once
// How the ranks of one corpus job (decode/corpus_translation.h) agree, through the rendezvous
// store of their launcher (dist/rendezvous.h): rank 0 names the run and takes the output's
// lock, and every rank hears both before it touches the output's folder; then two barriers:
// every rank has opened the folder before any can finish it (a rank that starts late would
// otherwise make a new folder after rank 0 removed the finished one), and rank 0 assembles the
// output only once every rank has ended its pass (none still reads the folder).
//
//   CorpusRanks ranks(worker, lock_output);   // every rank; waits for all of them
//   corpus.run = ranks.run();
//   corpus.sync = ranks.sync();

#include <functional>
#include <memory>
#include <string>

#include "decode/corpus_translation.h"
#include "dist/worker_env.h"

namespace nmt::job {

/// One rank's membership in a corpus job of several ranks.
class CorpusRanks {
 public:
  /// Joins the rendezvous (every rank; DistError when one does not come). Rank 0 calls
  /// `take_lock` (unless nmt-translate's launcher holds the lock) and publishes what it
  /// threw: every rank then throws ConfigError with it.
  CorpusRanks(const dist::WorkerEnv& worker, const std::function<void()>& take_lock);
  ~CorpusRanks();
  CorpusRanks(const CorpusRanks&) = delete;
  CorpusRanks& operator=(const CorpusRanks&) = delete;

  /// The run's name, rank 0's, the same on every rank.
  const std::string& run() const;
  /// The barriers of translate_corpus on the store.
  decode::CorpusSync sync();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nmt::job
