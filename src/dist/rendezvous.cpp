#include "dist/rendezvous.h"

#include <unistd.h>

#include <climits>
#include <optional>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "dist/process_group.h"
#include "dist/store_socket.h"
#include "util/error.h"
#include "util/log.h"

namespace nmt::dist {
namespace {

std::string seconds(std::chrono::milliseconds t) {
  return fmt::format("{:g} s", static_cast<double>(t.count()) / 1000.0);
}

/// The key under which rank r announces itself; its value is "<pid> <host identity>".
std::string announce_key(int r) { return fmt::format("nmt/rdzv/{}", r); }

}  // namespace

std::string one_line_reason(const std::exception& e) {
  std::string text;
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    text = c10_error->what_without_backtrace();
  } else {
    text = e.what();
  }
  // c10 appends "Exception raised from ... (most recent call first):" on later lines.
  const auto newline = text.find('\n');
  if (newline != std::string::npos) text.resize(newline);
  return text;
}

std::string host_identity() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "(unnamed host)";
  return name;
}

HostRanks host_ranks_of(const std::vector<std::string>& hosts, int rank) {
  NMT_CHECK(rank >= 0 && rank < static_cast<int>(hosts.size()), DistError,
            "rank {}: not among the {} ranks that announced their host", rank, hosts.size());
  HostRanks here;
  here.local_world_size = 0;
  for (int r = 0; r < static_cast<int>(hosts.size()); ++r) {
    if (hosts[r] != hosts[rank]) continue;
    if (r < rank) ++here.local_rank;
    ++here.local_world_size;
  }
  return here;
}

void validate_rendezvous_options(const CommunicatorOptions& o) {
  NMT_CHECK(o.world_size >= 1, DistError, "world size: expected >= 1, found {}", o.world_size);
  NMT_CHECK(o.rank >= 0 && o.rank < o.world_size, DistError,
            "rank: expected a value in [0, {}), found {}", o.world_size, o.rank);
  const bool port_from_socket = o.master_port == 0 && (o.world_size == 1 || o.listen_fd >= 0);
  NMT_CHECK((o.master_port > 0 && o.master_port < 65536) || port_from_socket, DistError,
            "rank {}: master port: expected 1..65535, found {}", o.rank, o.master_port);
  NMT_CHECK(!o.master_addr.empty(), DistError, "rank {}: master address is empty", o.rank);
  NMT_CHECK(o.timeout.count() > 0, DistError, "rank {}: timeout: expected > 0 ms, found {}",
            o.rank, o.timeout.count());
}

struct Rendezvous::Impl {
  CommunicatorOptions options;
  c10::intrusive_ptr<c10d::Store> store;
  std::vector<std::string> hosts;  // host_identity() of each rank, by rank

  std::string where() const {
    return fmt::format("{}:{}", options.master_addr, options.master_port);
  }
  void open_store();
  void join();
};

/// Rank 0 hosts the store, or (agent store) everyone is a client of torchrun's agent.
void Rendezvous::Impl::open_store() {
  const CommunicatorOptions& o = options;
  try {
    c10d::TCPStoreOptions so;
    so.isServer = !o.agent_store && o.rank == 0;
    if (so.isServer) {
      // The store listens only where MASTER_ADDR points, on a socket bound before anyone was
      // told the port (store_socket.h), never on every interface.
      int fd = o.listen_fd;
      if (fd < 0) {
        const StoreSocket bound = listen_for_store(o.master_addr, o.master_port);
        fd = bound.fd;
        log::debug("dist", "rendezvous store listening on {}:{}", bound.address, bound.port);
      }
      options.master_port = bound_port(fd);
      so.masterListenFd = fd;
    }
    so.port = static_cast<std::uint16_t>(o.master_port);
    so.numWorkers = o.agent_store ? std::nullopt : std::optional<std::size_t>(o.world_size);
    so.waitWorkers = false;  // our own rendezvous says which ranks are missing
    so.timeout = o.timeout;
    auto tcp = c10::make_intrusive<c10d::TCPStore>(o.master_addr, so);
    if (o.agent_store) {
      store = c10::make_intrusive<c10d::PrefixStore>(
          fmt::format("/worker/attempt_{}", o.restart_count), tcp);
    } else {
      store = tcp;
    }
  } catch (const std::exception& e) {
    NMT_THROW(DistError, "rank {}: cannot {} the rendezvous store at {} (timeout {}): {}",
              o.rank, !o.agent_store && o.rank == 0 ? "host" : "connect to", where(),
              seconds(o.timeout), one_line_reason(e));
  }
}

/// Every rank announces itself and its host, and waits for all others.
void Rendezvous::Impl::join() {
  const CommunicatorOptions& o = options;
  std::vector<std::string> keys;
  for (int r = 0; r < o.world_size; ++r) keys.push_back(announce_key(r));
  try {
    store->set(keys[o.rank], fmt::format("{} {}", getpid(), host_identity()));
    store->wait(keys, o.timeout);
    for (const std::string& key : keys) {
      const std::vector<uint8_t> bytes = store->get(key);
      const std::string value(bytes.begin(), bytes.end());
      const auto space = value.find(' ');
      hosts.push_back(space == std::string::npos ? value : value.substr(space + 1));
    }
  } catch (const std::exception& e) {
    std::vector<int> missing;
    try {
      for (int r = 0; r < o.world_size; ++r)
        if (!store->check({keys[r]})) missing.push_back(r);
    } catch (const std::exception&) {
      // The store itself is gone; the original reason says so.
    }
    if (!missing.empty()) {
      NMT_THROW(DistError, "rank {}: rendezvous with {} timed out after {}: {} of {} ranks "
                "joined (missing: {})", o.rank, where(), seconds(o.timeout),
                o.world_size - static_cast<int>(missing.size()), o.world_size,
                fmt::join(missing, ", "));
    }
    NMT_THROW(DistError, "rank {}: rendezvous with {} failed: {}", o.rank, where(),
              one_line_reason(e));
  }
}

Rendezvous::Rendezvous(const CommunicatorOptions& options) : impl_(std::make_unique<Impl>()) {
  validate_rendezvous_options(options);
  impl_->options = options;
  impl_->open_store();
  impl_->join();
}

Rendezvous::~Rendezvous() = default;
Rendezvous::Rendezvous(Rendezvous&&) noexcept = default;
Rendezvous& Rendezvous::operator=(Rendezvous&&) noexcept = default;

const CommunicatorOptions& Rendezvous::options() const { return impl_->options; }
std::string Rendezvous::where() const { return impl_->where(); }
HostRanks Rendezvous::host_ranks() const {
  return host_ranks_of(impl_->hosts, impl_->options.rank);
}
c10::intrusive_ptr<c10d::Store> Rendezvous::store() const { return impl_->store; }

}  // namespace nmt::dist
