#include "dist/gloo_devices.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

// ProcessGroupGloo.hpp includes <gloo/...>, which the wheel does not ship: Debian's
// libgloo-dev provides them. Sound for the reasons process_group.cpp gives: the devices are
// created and owned by LibTorch, and only handed on as shared_ptr values.
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

namespace nmt::dist {

std::string local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return "";
  std::string result;
  for (addrinfo* a = found; a != nullptr && result.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
      char text[INET6_ADDRSTRLEN] = {};
      const void* address =
          local.ss_family == AF_INET
              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
              : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (inet_ntop(local.ss_family, address, text, sizeof(text)) != nullptr) result = text;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return result;
}

std::vector<std::shared_ptr<::gloo::transport::Device>> gloo_devices(const std::string& master_addr,
                                                                     int master_port) {
  std::vector<std::shared_ptr<::gloo::transport::Device>> devices;
  if (const char* names = std::getenv("GLOO_SOCKET_IFNAME"); names != nullptr && *names) {
    std::stringstream list(names);
    std::string name;
    while (std::getline(list, name, ',')) {
      if (!name.empty()) devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
    }
    return devices;
  }
  const std::string local = local_address_towards(master_addr, master_port);
  devices.push_back(local.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                                  : c10d::ProcessGroupGloo::createDeviceForHostname(local));
  return devices;
}

}  // namespace nmt::dist
