#pragma once
// The listening socket of the rendezvous store. The store is unauthenticated, so it listens
// only on the address that MASTER_ADDR names (127.0.0.1 on one node: not reachable from the
// network; on several nodes, rank 0's interface that the others reach), never on every
// interface as LibTorch's TCPStore would, and never falls back to every interface: an address
// that is not this machine's is an error naming MASTER_ADDR. The socket is bound before any
// rank is told the port and handed to the store (TCPStoreOptions::masterListenFd), so no other
// process can take the port in between: nmt-train's launcher binds it and passes it to rank 0
// (kStoreFdVariable). Torch-free, like the launcher.
//
// A name that resolves to several addresses (a host with IPv4 and IPv6, or a multi-homed
// host) is bound on the first of them, in getaddrinfo's order, that is an address of this
// machine; the other ranks connect to the same name and try each of its addresses in turn.

#include <string>
#include <vector>

struct sockaddr;

namespace nmt::dist {

/// Environment variable through which nmt-train's launcher gives rank 0 the store's listening
/// socket (a file descriptor number).
inline constexpr const char* kStoreFdVariable = "NMT_STORE_FD";

/// A bound, listening TCP socket.
struct StoreSocket {
  int fd = -1;          ///< close-on-exec; the caller owns it
  int port = 0;         ///< the port it is bound to
  std::string address;  ///< the numeric address it is bound to, e.g. "127.0.0.1"
};

/// Binds and listens on the first address `host` resolves to that is an address of this
/// machine, and `port` (0: a free port the kernel picks). Throws DistError naming host:port,
/// the addresses tried and why each failed: "not an address of this machine" (EADDRNOTAVAIL)
/// says to set MASTER_ADDR (or --master-addr / dist.master_addr) to one of this machine's
/// addresses that the other ranks reach, e.g. 127.0.0.1 on one node; or the port is in use.
StoreSocket listen_for_store(const std::string& host, int port);

/// listen_for_store on addresses already resolved (numeric text, e.g. "192.0.2.1", "::1"),
/// tried in order; `host` names them in errors.
StoreSocket listen_for_store_on(const std::string& host, const std::vector<std::string>& addresses,
                                int port);

/// The port a listening socket is bound to; throws DistError when it is not a bound socket.
int bound_port(int fd);

}  // namespace nmt::dist
