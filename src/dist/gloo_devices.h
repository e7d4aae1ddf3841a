#pragma once
// The network devices Gloo connects through: GLOO_SOCKET_IFNAME's interfaces, else the
// address of the interface that routes to the master. Internal to dist/ (process_group.cpp).

#include <memory>
#include <string>
#include <vector>

namespace gloo::transport {
class Device;
}  // namespace gloo::transport

namespace nmt::dist {

/// The local IPv4/IPv6 address the kernel would use to reach host:port, or "" when the host
/// does not resolve or no route leads there. A UDP connect sends nothing; it only picks the
/// route.
std::string local_address_towards(const std::string& host, int port);

/// Gloo devices: one per name of GLOO_SOCKET_IFNAME (comma-separated) when it is set, as torch
/// does, else one on local_address_towards(master) (the loopback for a single-node job), else
/// Gloo's default device.
std::vector<std::shared_ptr<::gloo::transport::Device>> gloo_devices(const std::string& master_addr,
                                                                     int master_port);

}  // namespace nmt::dist
