#pragma once
// The listening socket of the rendezvous store. The store is unauthenticated, so it listens
// only on the address that MASTER_ADDR names (127.0.0.1 on one node: not reachable from the
// network; on several nodes, rank 0's interface that the others reach), never on every
// interface as LibTorch's TCPStore would. The socket is bound before any rank is told the port
// and handed to the store (TCPStoreOptions::masterListenFd), so no other process can take the
// port in between: nmt-train's launcher binds it and passes it to rank 0 (kStoreFdVariable).
// Torch-free, like the launcher.

#include <string>

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

/// Binds and listens on the address `host` resolves to and `port` (0: a free port the kernel
/// picks). When `host` is not an address of this machine, listens on every interface instead
/// and says so in `address` ("0.0.0.0"/"::"). Throws DistError naming host:port on failure
/// (e.g. the port is in use).
StoreSocket listen_for_store(const std::string& host, int port);

/// The port a listening socket is bound to; throws DistError when it is not a bound socket.
int bound_port(int fd);

}  // namespace nmt::dist
