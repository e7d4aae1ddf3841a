#include "job/corpus_ranks.h"

#include <unistd.h>

#include <chrono>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "dist/process_group.h"
#include "dist/rendezvous.h"
#include "dist/store_values.h"
#include "util/error.h"
#include "util/host_name.h"

namespace nmt::job {
namespace {

/// How long a rank waits for the others at a barrier: the last shard of a slow rank.
constexpr std::chrono::minutes kBarrierTimeout{60};
/// Rank 0's name of the run, and what refused it the lock ("" when it holds it).
constexpr const char* kRunKey = "corpus/run";
constexpr const char* kRefusalKey = "corpus/refusal";

std::string bytes_text(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace

struct CorpusRanks::Impl {
  dist::WorkerEnv worker;
  dist::Rendezvous rendezvous;
  std::string run;

  Impl(const dist::WorkerEnv& w, dist::CommunicatorOptions options)
      : worker(w), rendezvous(options) {}

  c10::intrusive_ptr<c10d::Store> store() const { return rendezvous.store(); }

  /// Publishes rank 0's run name and lock refusal; every rank reads them.
  void agree(const std::function<void()>& take_lock) {
    try {
      if (worker.rank == 0) {
        std::string refusal;
        try {
          if (!worker.launched_by_us) take_lock();
        } catch (const Error& e) {
          refusal = e.what();
        }
        run = fmt::format("{} pid {} at {}", host_name().value_or("host"), ::getpid(),
                          std::chrono::system_clock::now().time_since_epoch().count());
        store()->set(kRunKey, run);
        store()->set(kRefusalKey, refusal);
      }
      run = bytes_text(store()->get(kRunKey));
      const std::string refusal = bytes_text(store()->get(kRefusalKey));
      dist::check_value_size(worker.rank, kRefusalKey, refusal, dist::kMaxGatherBytes, "a message");
      NMT_CHECK(refusal.empty(), ConfigError, "{}", refusal);
    } catch (const c10::Error& e) {
      throw DistError(fmt::format("rank {}: the rendezvous store at {} failed: {}", worker.rank,
                                  rendezvous.where(), dist::one_line_reason(e)));
    }
  }

  /// Sets "corpus/<name>/<rank>"; with `wait`, returns when every rank has set its own.
  void barrier(const std::string& name, bool wait) {
    try {
      store()->set(fmt::format("corpus/{}/{}", name, worker.rank), std::string("1"));
      if (!wait) return;
      std::vector<std::string> keys;
      for (int r = 0; r < worker.world_size; ++r)
        keys.push_back(fmt::format("corpus/{}/{}", name, r));
      store()->wait(keys, kBarrierTimeout);
    } catch (const c10::Error& e) {
      throw DistError(fmt::format("rank {}: waiting for every rank to have {} failed at {}: {}",
                                  worker.rank, name, rendezvous.where(), dist::one_line_reason(e)));
    }
  }
};

CorpusRanks::CorpusRanks(const dist::WorkerEnv& worker, const std::function<void()>& take_lock) {
  dist::CommunicatorOptions options;
  options.master_addr = worker.master_addr;
  options.master_port = dist::store_port(worker, 0);
  options.listen_fd = worker.rank == 0 ? worker.store_fd : -1;
  options.rank = worker.rank;
  options.world_size = worker.world_size;
  options.agent_store = worker.agent_store;
  options.restart_count = worker.restart_count;
  impl_ = std::make_unique<Impl>(worker, options);
  impl_->agree(take_lock);
}

CorpusRanks::~CorpusRanks() = default;

const std::string& CorpusRanks::run() const { return impl_->run; }

decode::CorpusSync CorpusRanks::sync() {
  Impl* impl = impl_.get();
  decode::CorpusSync sync;
  sync.opened = [impl] { impl->barrier("opened", true); };
  // Rank 0 waits for the others' word; they say it and go.
  sync.finished = [impl] { impl->barrier("finished", impl->worker.rank == 0); };
  return sync;
}

}  // namespace nmt::job
