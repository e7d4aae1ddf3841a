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

/// What tells one host from another. Ranks share a host (its cores, memory and GPUs) when all
/// three agree: the hostname alone does not tell (cloned machine images, network namespaces
/// of one machine as in scripts/fault/two-hosts.sh, and the "(unnamed host)" fallback share
/// one), and the boot id alone does not either (containers on one machine, such as Kubernetes
/// pods with GPUs of their own, share it but have a hostname and a network namespace each).
struct HostIdentity {
  std::string hostname;  ///< gethostname(), "(unnamed host)" when unset: for people
  std::string boot_id;   ///< /proc/sys/kernel/random/boot_id: one per machine and boot; "" unknown
  std::string netns;     ///< inode of /proc/self/ns/net: one per network namespace; "" unknown

  /// Same host: every field equal.
  bool operator==(const HostIdentity& other) const;
  bool operator!=(const HostIdentity& other) const { return !(*this == other); }
  /// For log lines: the hostname, then the rest, e.g. "node7 (boot 1a2b3c4d, netns 4026531833)".
  std::string describe() const;
};

/// This process's host.
HostIdentity this_host();

/// The announcement value of a rank: "<pid> <boot id or -> <netns or -> <hostname>".
std::string announcement(int pid, const HostIdentity& host);
/// The host of an announcement; throws DistError naming `rank` and the key when it is
/// malformed or longer than kMaxAnnouncementBytes (dist/store_values.h).
HostIdentity parse_announcement(const std::string& value, int rank, const std::string& key);

/// The HostRanks of `rank` when rank r announced `hosts[r]`.
HostRanks host_ranks_of(const std::vector<HostIdentity>& hosts, int rank);

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
  /// This rank's place on its host, from every rank's announced this_host().
  HostRanks host_ranks() const;
  /// Every rank's announced host, by rank.
  const std::vector<HostIdentity>& hosts() const;
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
