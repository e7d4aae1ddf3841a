#include "dist/rendezvous.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <optional>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "dist/process_group.h"
#include "dist/store_socket.h"
#include "dist/store_values.h"
#include "util/duration.h"
#include "util/error.h"
#include "util/host_name.h"
#include "util/log.h"

namespace nmt::dist {
namespace {

/// The key under which rank r announces itself; its value is announcement().
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

namespace {

/// The first line of a small file, without its newline; "" when it cannot be read.
std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  return line;
}

/// The inode of a namespace link such as /proc/self/ns/net ("net:[4026531833]" -> its
/// number); "" when it cannot be read.
std::string namespace_inode(const char* path) {
  struct stat st {};
  if (::stat(path, &st) != 0) return "";
  return std::to_string(static_cast<unsigned long long>(st.st_ino));
}

/// A field of an announcement: "-" for unknown, and never with a space.
std::string field(const std::string& value) {
  if (value.empty()) return "-";
  std::string out = value;
  for (char& c : out)
    if (c == ' ' || c == '\n' || c == '\t') c = '_';
  return out;
}

}  // namespace

bool HostIdentity::operator==(const HostIdentity& other) const {
  return hostname == other.hostname && boot_id == other.boot_id && netns == other.netns;
}

std::string HostIdentity::describe() const {
  return fmt::format("{} (boot {}, netns {})", hostname,
                     boot_id.empty() ? std::string("unknown") : boot_id.substr(0, 8),
                     netns.empty() ? std::string("unknown") : netns);
}

HostIdentity this_host() {
  HostIdentity host;
  host.hostname = host_name().value_or("(unnamed host)");
  host.boot_id = first_line("/proc/sys/kernel/random/boot_id");
  host.netns = namespace_inode("/proc/self/ns/net");
  return host;
}

std::string announcement(int pid, const HostIdentity& host) {
  return fmt::format("{} {} {} {}", pid, field(host.boot_id), field(host.netns), host.hostname);
}

HostIdentity parse_announcement(const std::string& value, int rank, const std::string& key) {
  check_value_size(rank, key, value, kMaxAnnouncementBytes, "a rank's announcement");
  // "<pid> <boot id> <netns> <hostname>"; the hostname may hold spaces ("(unnamed host)").
  const size_t a = value.find(' ');
  const size_t b = a == std::string::npos ? a : value.find(' ', a + 1);
  const size_t c = b == std::string::npos ? b : value.find(' ', b + 1);
  NMT_CHECK(c != std::string::npos && c + 1 < value.size() && a > 0 &&
                value.find_first_not_of("0123456789") == a,
            DistError,
            "rank {}: malformed value of '{}' in the rendezvous store: '{}' (expected a rank's "
            "announcement: '<pid> <boot id> <netns> <hostname>'; is another program or an "
            "older nmt-train using this store?)",
            rank, key, printable_prefix(value));
  const auto unknown = [](std::string f) { return f == "-" ? std::string() : f; };
  HostIdentity host;
  host.boot_id = unknown(value.substr(a + 1, b - a - 1));
  host.netns = unknown(value.substr(b + 1, c - b - 1));
  host.hostname = value.substr(c + 1);
  return host;
}

HostRanks host_ranks_of(const std::vector<HostIdentity>& hosts, int rank) {
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
  std::vector<HostIdentity> hosts;  // this_host() of each rank, by rank

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
    // The libuv server refuses a value over kStoreServerMaxValueBytes before allocating it
    // (store_values.h); the older server would allocate whatever size a client claims.
    so.useLibUV = true;
    auto tcp = c10::make_intrusive<c10d::TCPStore>(o.master_addr, so);
    NMT_CHECK(!so.isServer || tcp->isLibUvBackend(), DistError,
              "rank 0: this LibTorch hosts the rendezvous store without its libuv backend, "
              "which bounds the values clients send; nmt-train needs a LibTorch built with "
              "libuv (the PyPI wheels are)");
    if (o.agent_store) {
      store = c10::make_intrusive<c10d::PrefixStore>(
          fmt::format("/worker/attempt_{}", o.restart_count), tcp);
    } else {
      store = tcp;
    }
  } catch (const std::exception& e) {
    NMT_THROW(DistError, "rank {}: cannot {} the rendezvous store at {} (timeout {}): {}",
              o.rank, !o.agent_store && o.rank == 0 ? "host" : "connect to", where(),
              format_seconds(o.timeout), one_line_reason(e));
  }
}

/// Every rank announces itself and its host, and waits for all others.
void Rendezvous::Impl::join() {
  const CommunicatorOptions& o = options;
  std::vector<std::string> keys;
  for (int r = 0; r < o.world_size; ++r) keys.push_back(announce_key(r));
  std::vector<std::string> values;
  try {
    store->set(keys[o.rank], announcement(getpid(), this_host()));
    store->wait(keys, o.timeout);
    for (int r = 0; r < o.world_size; ++r) {
      const std::vector<uint8_t> bytes = store->get(keys[r]);
      values.emplace_back(bytes.begin(), bytes.end());
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
                "joined (missing: {})", o.rank, where(), format_seconds(o.timeout),
                o.world_size - static_cast<int>(missing.size()), o.world_size,
                fmt::join(missing, ", "));
    }
    NMT_THROW(DistError, "rank {}: rendezvous with {} failed: {}", o.rank, where(),
              one_line_reason(e));
  }
  // Parsed outside the try: a malformed announcement is reported as such, not as a store that
  // failed.
  for (int r = 0; r < o.world_size; ++r)
    hosts.push_back(parse_announcement(values[r], o.rank, keys[r]));
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
const std::vector<HostIdentity>& Rendezvous::hosts() const { return impl_->hosts; }
HostRanks Rendezvous::host_ranks() const {
  return host_ranks_of(impl_->hosts, impl_->options.rank);
}
c10::intrusive_ptr<c10d::Store> Rendezvous::store() const { return impl_->store; }

}  // namespace nmt::dist
