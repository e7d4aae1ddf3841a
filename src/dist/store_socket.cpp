#include "dist/store_socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/error.h"

namespace nmt::dist {
namespace {

/// The numeric text of an address.
std::string numeric(const sockaddr* addr, socklen_t length) {
  char host[NI_MAXHOST] = {};
  if (::getnameinfo(addr, length, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) return "?";
  return host;
}

/// A listening socket on `addr`, or -1 with errno set.
int bind_and_listen(const sockaddr* addr, socklen_t length) {
  const int fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (::bind(fd, addr, length) != 0 || ::listen(fd, 2048) != 0) {
    const int error = errno;
    ::close(fd);
    errno = error;
    return -1;
  }
  return fd;
}

/// getaddrinfo's answer, freed on scope exit.
struct Resolved {
  addrinfo* list = nullptr;
  int status = 0;
  Resolved(const std::string& host, int port, int flags) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = flags;
    status = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  }
  ~Resolved() {
    if (list) ::freeaddrinfo(list);
  }
  Resolved(const Resolved&) = delete;
  Resolved& operator=(const Resolved&) = delete;
};

/// Tries each address in turn; the first that binds wins. `tried` collects "address: why" of
/// the others.
template <class Next>
StoreSocket bind_first(const std::string& host, int port, Next next) {
  StoreSocket out;
  std::vector<std::string> tried;
  bool foreign = false;
  while (const addrinfo* a = next()) {
    const std::string address = numeric(a->ai_addr, a->ai_addrlen);
    const int fd = bind_and_listen(a->ai_addr, a->ai_addrlen);
    if (fd >= 0) {
      out.fd = fd;
      out.address = address;
      out.port = bound_port(fd);
      return out;
    }
    // EADDRNOTAVAIL: not an address of this machine. The store never listens on every
    // interface instead: it is unauthenticated, and every interface may face the network.
    const bool not_ours = errno == EADDRNOTAVAIL;
    foreign = foreign || not_ours;
    tried.push_back(fmt::format(
        "{} ({})", address, not_ours ? "not an address of this machine" : std::strerror(errno)));
  }
  NMT_THROW(DistError, "rendezvous store: cannot listen on {}:{}: {}{}", host, port,
            tried.empty() ? std::string("no address") : fmt::format("{}", fmt::join(tried, "; ")),
            foreign ? fmt::format(". MASTER_ADDR (or --master-addr, dist.master_addr) names the "
                                  "host of rank 0, and rank 0 listens only there, never on every "
                                  "interface: set it to an address of rank 0's machine that the "
                                  "other ranks reach (127.0.0.1 when all ranks run on one "
                                  "machine), not to {}",
                                  host)
                    : std::string());
}

}  // namespace

int bound_port(int fd) {
  sockaddr_storage addr{};
  socklen_t length = sizeof addr;
  NMT_CHECK(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0, DistError,
            "rendezvous store socket (fd {}): getsockname failed: {}", fd, std::strerror(errno));
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  NMT_CHECK(addr.ss_family == AF_INET6, DistError,
            "rendezvous store socket (fd {}): not a TCP socket", fd);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
}

StoreSocket listen_for_store(const std::string& host, int port) {
  const Resolved found(host, port, 0);
  NMT_CHECK(found.status == 0 && found.list, DistError,
            "rendezvous store: cannot resolve MASTER_ADDR {}: {}", host,
            ::gai_strerror(found.status));
  const addrinfo* at = found.list;
  return bind_first(host, port, [&at]() {
    const addrinfo* a = at;
    if (at) at = at->ai_next;
    return a;
  });
}

StoreSocket listen_for_store_on(const std::string& host, const std::vector<std::string>& addresses,
                                int port) {
  std::vector<std::unique_ptr<Resolved>> each;
  for (const std::string& address : addresses) {
    each.push_back(std::make_unique<Resolved>(address, port, AI_NUMERICHOST));
    NMT_CHECK(each.back()->status == 0 && each.back()->list, DistError,
              "rendezvous store: {} ({}) is not a numeric address: {}", address, host,
              ::gai_strerror(each.back()->status));
  }
  size_t i = 0;
  return bind_first(
      host, port, [&]() -> const addrinfo* { return i < each.size() ? each[i++]->list : nullptr; });
}

}  // namespace nmt::dist
