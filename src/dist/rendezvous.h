#pragma once
// The first step of joining a job: the rendezvous store (rank 0 hosts it, or torchrun's agent
// does) and the rendezvous on it, where every rank announces itself and its host and waits
// for all the others. What it learns comes before any device or backend is chosen: how many
// ranks share this host, which launchers such as a hand-set RANK/WORLD_SIZE/LOCAL_RANK or PMI
// without a local size do not say, and which decides the threads, the GPU sharing and
// whether NCCL can be used at all. The Communicator (process_group.h) then builds its
// process group on the joined store.
//
//   Rendezvous joined(options);                   // every rank; waits for all of them
//   HostRanks here = joined.host_ranks();         // e.g. {local_rank 1, local_world_size 2}
//   Communicator comm(std::move(joined), options);

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Store;
}

namespace nmt::dist {

struct CommunicatorOptions;

/// This rank's place among the ranks of its host, as the rendezvous found them.
struct HostRanks {
  int local_rank = 0;        ///< index among this host's ranks, in global rank order
  int local_world_size = 1;  ///< ranks on this host
};

/// The name by which ranks recognise a shared host: the hostname. Not the kernel's boot id:
/// containers on one machine (Kubernetes pods, each with its own GPUs) share that, but each
/// has a hostname of its own.
std::string host_identity();

/// The HostRanks of `rank` when rank r announced `hosts[r]`.
HostRanks host_ranks_of(const std::vector<std::string>& hosts, int rank);

/// One rank's joined rendezvous. Movable, so the Communicator can take it over.
class Rendezvous {
 public:
  /// Hosts or connects to the store and waits until every rank has announced itself. Throws
  /// DistError naming the rank, the address and what failed (e.g. "rank 1: rendezvous with
  /// 127.0.0.1:29500 timed out after 30 s: 1 of 2 ranks joined (missing: 0)").
  explicit Rendezvous(const CommunicatorOptions& options);
  ~Rendezvous();
  Rendezvous(Rendezvous&&) noexcept;
  Rendezvous& operator=(Rendezvous&&) noexcept;

  /// The options, with master_port set to the port bound when it was 0.
  const CommunicatorOptions& options() const;
  /// "address:port" of the store, for messages.
  std::string where() const;
  /// This rank's place on its host, from every rank's announced host_identity().
  HostRanks host_ranks() const;
  /// The store (with torchrun's agent prefix where there is one).
  c10::intrusive_ptr<c10d::Store> store() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Checks the options a rendezvous uses (rank, world size, address, port, timeout); throws
/// DistError naming the rank and the value.
void validate_rendezvous_options(const CommunicatorOptions& options);

/// A c10 message without its C++ backtrace, on one line.
std::string one_line_reason(const std::exception& e);

}  // namespace nmt::dist
