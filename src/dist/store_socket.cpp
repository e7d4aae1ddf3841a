#include "dist/store_socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

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
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int status = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  NMT_CHECK(status == 0 && found, DistError, "rendezvous store: cannot resolve {}: {}", host,
            ::gai_strerror(status));
  std::string why;
  StoreSocket out;
  for (const addrinfo* a = found; a && out.fd < 0; a = a->ai_next) {
    out.fd = bind_and_listen(a->ai_addr, a->ai_addrlen);
    if (out.fd >= 0) {
      out.address = numeric(a->ai_addr, a->ai_addrlen);
      break;
    }
    why = std::strerror(errno);
    if (errno != EADDRNOTAVAIL) continue;
    // Not an address of this machine (behind NAT, say): the other ranks still reach it
    // through some interface of ours, so listen on all of them.
    sockaddr_storage any{};
    socklen_t length = 0;
    if (a->ai_family == AF_INET6) {
      auto* v6 = reinterpret_cast<sockaddr_in6*>(&any);
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(static_cast<uint16_t>(port));
      v6->sin6_addr = in6addr_any;
      length = sizeof *v6;
    } else {
      auto* v4 = reinterpret_cast<sockaddr_in*>(&any);
      v4->sin_family = AF_INET;
      v4->sin_port = htons(static_cast<uint16_t>(port));
      v4->sin_addr.s_addr = htonl(INADDR_ANY);
      length = sizeof *v4;
    }
    out.fd = bind_and_listen(reinterpret_cast<sockaddr*>(&any), length);
    if (out.fd >= 0) out.address = a->ai_family == AF_INET6 ? "::" : "0.0.0.0";
    else why = std::strerror(errno);
  }
  ::freeaddrinfo(found);
  NMT_CHECK(out.fd >= 0, DistError, "rendezvous store: cannot listen on {}:{}: {}", host, port, why);
  out.port = bound_port(out.fd);
  return out;
}

}  // namespace nmt::dist
